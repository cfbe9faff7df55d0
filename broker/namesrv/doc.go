// Package namesrv is a RocketMQ name server: brokers register with it and clients ask it
// where a topic's queues are, over the RocketMQ remoting protocol (package broker/remoting).
// It holds no messages and no offsets.
//
//	s := namesrv.New(namesrv.Config{Dir: dir})   // Dir keeps the KV configuration
//	err := s.Serve("127.0.0.1:9876")             // returns once it listens
//	addr := s.Addr()
//	err = s.Close()
//
// # Brokers
//
// A broker registers (REGISTER_BROKER) with its name, cluster, id (0 master, ≥1 slave),
// address and its whole topic table, at start, every few seconds (its heartbeat) and
// whenever its topics change. A master's registration replaces the queues the name server
// lists for that broker name; one whose bodyCrc32 does not match its body is refused. A broker is forgotten when it unregisters
// (UNREGISTER_BROKER), when the connection it registered on closes, or when it has not
// registered for Config.BrokerExpiry (default 120 s, RocketMQ's); a broker name's queues
// leave the routes with its last address.
//
// # Clients
//
// GET_ROUTEINFO_BY_TOPIC merges the queues of every live broker that holds the topic
// (sorted by broker name) with those brokers' addresses, and the topic's ordered-topic
// configuration (KV namespace ORDER_TOPIC_CONFIG) as orderTopicConf, as Java name servers
// with orderMessageEnable do. GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
// GET_TOPICS_BY_CLUSTER, DELETE_TOPIC_IN_NAMESRV and the KV configuration (PUT, GET, DELETE,
// GET_KVLIST_BY_NAMESPACE) are served as RocketMQ's name server serves them; any other
// request code is answered "not supported". docs/operations.md shows a cluster.
//
// # Persistence
//
// Routes are rebuilt from the brokers' registrations after a restart (they register again
// within their heartbeat period). The KV configuration is written to Dir/kvConfig.json
// (replaced atomically and durably with internal/durable, through a file-system seam tests
// fail) before a PUT or DELETE is acknowledged; a PUT or DELETE it could not store is undone
// and answered with a system error. With Dir empty it lives in memory only.
//
// # Concurrency
//
// Every method is safe for concurrent use. Each connection has one goroutine that reads a
// request, handles it under the server's mutex (no handler blocks) and writes the reply.
package namesrv
