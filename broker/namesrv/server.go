package namesrv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"rsql/broker/remoting"
	"rsql/internal/durable"
	"rsql/internal/listen"
)

// Errors of this package.
var (
	ErrClosed  = errors.New("namesrv: closed")
	ErrServing = errors.New("namesrv: already serving")
)

// Request and response codes (RocketMQ's RequestCode and ResponseCode).
const (
	codePutKVConfig       = 100
	codeGetKVConfig       = 101
	codeDeleteKVConfig    = 102
	codeRegisterBroker    = 103
	codeUnregisterBroker  = 104
	codeGetRoute          = 105
	codeGetClusterInfo    = 106
	codeGetAllTopics      = 206
	codeDeleteTopic       = 216
	codeGetKVList         = 219
	codeGetTopicsByCluser = 224

	respSuccess         = 0
	respSystemError     = 1
	respNotSupported    = 3
	respTopicNotExist   = 17
	respQueryNotFound   = 22
	respInvalidArgument = 29
)

// OrderTopicConfig is the KV namespace whose value for a topic ("broker-a:4;broker-b:4")
// is that topic's fixed layout, returned in its route as orderTopicConf.
const OrderTopicConfig = "ORDER_TOPIC_CONFIG"

// Config configures a Server; zero fields take their defaults.
type Config struct {
	// Dir holds kvConfig.json; "" keeps the KV configuration in memory only.
	Dir string
	// BrokerExpiry forgets a broker that has not registered for this long (default 120 s).
	BrokerExpiry time.Duration
	// IdleTimeout closes a connection silent for this long (default 120 s).
	IdleTimeout time.Duration
	// MaxFrameSize caps one request (default 16 MiB).
	MaxFrameSize int
	// Logger receives operational messages (default: discard).
	Logger *slog.Logger

	fs durable.StateFS // kvConfig.json's reads and replacements; nil: durable.OS (tests fail it)
}

// Server is a name server. Its zero value is not usable; call New.
type Server struct {
	cfg Config

	mu      sync.Mutex
	ln      net.Listener
	closed  bool
	conns   map[net.Conn]struct{}
	brokers map[string]*brokerEntry                  // by broker name
	live    map[string]*liveBroker                   // by broker address
	topics  map[string]map[string]remoting.QueueData // topic -> broker name -> its queues
	kv      map[string]map[string]string             // namespace -> key -> value
	done    chan struct{}
	wg      sync.WaitGroup
}

// brokerEntry is one broker name: its cluster and the address of each id.
type brokerEntry struct {
	cluster string
	addrs   map[int64]string
}

// liveBroker is one registered broker process.
type liveBroker struct {
	name string
	id   int64
	last time.Time
	conn net.Conn // the connection it last registered on
}

// TopicConfig is one topic of a broker's registration (RocketMQ's TopicConfig).
type TopicConfig struct {
	TopicName      string `json:"topicName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
	Order          bool   `json:"order"`
}

// RegisterBody is REGISTER_BROKER's body (RocketMQ's RegisterBrokerBody, uncompressed).
type RegisterBody struct {
	TopicConfigSerializeWrapper struct {
		TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
		DataVersion      DataVersion            `json:"dataVersion"`
	} `json:"topicConfigSerializeWrapper"`
	FilterServerList []string `json:"filterServerList"`
}

// DataVersion says which state of a broker's topic table a registration carries.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// BodyCRC is a registration body's checksum as RocketMQ computes it (bodyCrc32: CRC-32 IEEE,
// its sign bit cleared); a registration carrying one that does not match is refused.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7fffffff }

// New returns a name server that is not listening yet.
func New(cfg Config) *Server {
	if cfg.BrokerExpiry <= 0 {
		cfg.BrokerExpiry = 120 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = 16 << 20
	}
	if cfg.fs == nil {
		cfg.fs = durable.OS
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: cfg, conns: map[net.Conn]struct{}{}, brokers: map[string]*brokerEntry{},
		live: map[string]*liveBroker{}, topics: map[string]map[string]remoting.QueueData{},
		kv: map[string]map[string]string{}, done: make(chan struct{})}
}

// Serve loads the KV configuration and listens on addr (port 0: a free port, see Addr). It
// returns once the server listens.
func (s *Server) Serve(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln != nil {
		return ErrServing
	}
	if s.cfg.Dir != "" {
		if err := s.cfg.fs.MkdirAll(s.cfg.Dir, 0o755); err != nil {
			return fmt.Errorf("namesrv: %w", err)
		}
		data, err := s.cfg.fs.ReadFile(s.kvPath())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("namesrv: %w", err)
		}
		if len(data) > 0 {
			var kv struct {
				ConfigTable map[string]map[string]string `json:"configTable"`
			}
			if err := json.Unmarshal(data, &kv); err != nil {
				return fmt.Errorf("namesrv: %s is corrupt: %w", s.kvPath(), err)
			}
			for ns, t := range kv.ConfigTable {
				if t != nil {
					s.kv[ns] = t
				}
			}
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("namesrv: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.wg.Add(2)
	go s.accept(ln)
	go s.expire()
	return nil
}

// Addr is the bound address ("" before Serve).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops listening, closes every connection and waits for their goroutines. It may be
// called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) kvPath() string { return filepath.Join(s.cfg.Dir, "kvConfig.json") }

// accept serves ln until Close; temporary accept errors are retried with backoff.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff listen.Backoff
	logf := func(msg string, args ...any) { s.cfg.Logger.Warn(msg, append(args, "listener", ln.Addr().String())...) }
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if backoff.Retry(err, logf) {
				continue
			}
			s.cfg.Logger.Error("name-server listener stopped", "listener", ln.Addr().String(), "err", err)
			return
		}
		backoff.Accepted(logf)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// serveConn reads requests and writes replies in order until the peer closes, a frame is
// malformed or the connection is idle for IdleTimeout. Brokers that registered on it are
// forgotten when the peer closes it.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	idle := false
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if !idle {
			// The peer went away (a killed broker's connection resets or ends). A
			// connection this server closed for silence leaves its brokers to the expiry.
			s.dropConnLocked(c)
		}
		s.mu.Unlock()
	}()
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		p, err := remoting.ReadFrame(c, s.cfg.MaxFrameSize, nil)
		if err != nil {
			idle = errors.Is(err, os.ErrDeadlineExceeded)
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !idle {
				s.cfg.Logger.Warn("closing connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		req, err := remoting.Decode(p)
		if err != nil {
			s.cfg.Logger.Warn("closing connection", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		if req.IsResponse() {
			continue
		}
		resp := s.handle(c, req)
		if req.Flag&remoting.FlagOneway != 0 {
			continue
		}
		if err := writeCommand(c, resp); err != nil {
			return
		}
	}
}

func writeCommand(c net.Conn, cmd *remoting.Command) error {
	f, err := remoting.Encode(make([]byte, 0, 256+len(cmd.Body)), cmd)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = c.Write(f)
	return err
}

// handle answers one request.
func (s *Server) handle(c net.Conn, req *remoting.Command) *remoting.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.Code {
	case codeRegisterBroker:
		return s.register(c, req)
	case codeUnregisterBroker:
		if lb := s.live[req.Ext("brokerAddr")]; lb != nil && lb.name == req.Ext("brokerName") {
			s.removeLocked(req.Ext("brokerAddr"), "unregistered")
		}
		return req.Reply(respSuccess, "")
	case codeGetRoute:
		return s.route(req)
	case codeGetClusterInfo:
		return s.clusterInfo(req)
	case codeGetAllTopics:
		return s.topicList(req, "")
	case codeGetTopicsByCluser:
		return s.topicList(req, req.Ext("cluster"))
	case codeDeleteTopic:
		delete(s.topics, req.Ext("topic"))
		return req.Reply(respSuccess, "")
	case codePutKVConfig, codeDeleteKVConfig:
		return s.updateKV(req)
	case codeGetKVConfig:
		v, ok := s.kv[req.Ext("namespace")][req.Ext("key")]
		if !ok {
			return req.Reply(respQueryNotFound, fmt.Sprintf("No config item, Namespace: %s Key: %s", req.Ext("namespace"), req.Ext("key")))
		}
		r := req.Reply(respSuccess, "")
		r.ExtFields = map[string]string{"value": v}
		return r
	case codeGetKVList:
		t, ok := s.kv[req.Ext("namespace")]
		if !ok {
			return req.Reply(respQueryNotFound, "No config item, Namespace: "+req.Ext("namespace"))
		}
		r := req.Reply(respSuccess, "")
		// Cannot fail: strings, integers and maps with string keys only.
		r.Body, _ = json.Marshal(map[string]any{"table": t})
		return r
	}
	return req.Reply(respNotSupported, fmt.Sprintf("request code %d is not supported by this name server", req.Code))
}

// register records a broker's registration (or heartbeat).
func (s *Server) register(c net.Conn, req *remoting.Command) *remoting.Command {
	name, addr, cluster := req.Ext("brokerName"), req.Ext("brokerAddr"), req.Ext("clusterName")
	id, err := req.ExtInt("brokerId")
	if err != nil || name == "" || addr == "" || cluster == "" || id < 0 {
		return req.Reply(respInvalidArgument, "register broker: brokerName, brokerAddr, clusterName and brokerId (≥ 0) are required")
	}
	if req.Ext("compressed") == "true" {
		return req.Reply(respNotSupported, "register broker: compressed registrations are not supported (set compressedRegister=false)")
	}
	if c := req.Ext("bodyCrc32"); c != "" && c != "0" && c != strconv.FormatUint(uint64(BodyCRC(req.Body)), 10) {
		return req.Reply(respSystemError, "register broker "+name+": crc32 not match (bodyCrc32 "+c+")")
	}
	var body RegisterBody
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return req.Reply(respInvalidArgument, "register broker "+name+": body is not a RegisterBrokerBody: "+err.Error())
		}
	}
	be := s.brokers[name]
	if be == nil {
		be = &brokerEntry{addrs: map[int64]string{}}
		s.brokers[name] = be
		s.cfg.Logger.Info("broker registered", "broker", name, "id", id, "addr", addr, "cluster", cluster)
	} else if be.addrs[id] != addr {
		s.cfg.Logger.Info("broker registered", "broker", name, "id", id, "addr", addr, "cluster", cluster)
	}
	be.cluster = cluster
	// An address registered under another id or name moves.
	for oid, a := range be.addrs {
		if a == addr && oid != id {
			delete(be.addrs, oid)
		}
	}
	if prev := s.live[addr]; prev != nil && prev.name != name {
		s.removeLocked(addr, "registered again as "+name)
		be = s.brokers[name]
		if be == nil {
			be = &brokerEntry{cluster: cluster, addrs: map[int64]string{}}
			s.brokers[name] = be
		}
	}
	be.addrs[id] = addr
	s.live[addr] = &liveBroker{name: name, id: id, last: time.Now(), conn: c}
	// A master's table is the broker name's queues; a slave's only while no master is
	// registered (a slave copies its master's topics).
	if _, master := be.addrs[0]; id == 0 || !master {
		table := body.TopicConfigSerializeWrapper.TopicConfigTable
		for t, qs := range s.topics {
			if _, ok := table[t]; !ok {
				delete(qs, name)
				if len(qs) == 0 {
					delete(s.topics, t)
				}
			}
		}
		for t, tc := range table {
			if t == "" {
				continue
			}
			if s.topics[t] == nil {
				s.topics[t] = map[string]remoting.QueueData{}
			}
			s.topics[t][name] = remoting.QueueData{BrokerName: name, ReadQueueNums: tc.ReadQueueNums,
				WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, TopicSysFlag: tc.TopicSysFlag}
		}
	}
	r := req.Reply(respSuccess, "")
	r.ExtFields = map[string]string{"masterAddr": be.addrs[0], "haServerAddr": req.Ext("haServerAddr")}
	return r
}

// removeLocked forgets the broker process at addr; its broker name's queues leave the
// routes with the name's last address.
func (s *Server) removeLocked(addr, why string) {
	lb := s.live[addr]
	if lb == nil {
		return
	}
	delete(s.live, addr)
	s.cfg.Logger.Info("broker removed", "broker", lb.name, "id", lb.id, "addr", addr, "why", why)
	be := s.brokers[lb.name]
	if be == nil {
		return
	}
	if be.addrs[lb.id] == addr {
		delete(be.addrs, lb.id)
	}
	if len(be.addrs) > 0 {
		return
	}
	delete(s.brokers, lb.name)
	for t, qs := range s.topics {
		delete(qs, lb.name)
		if len(qs) == 0 {
			delete(s.topics, t)
		}
	}
}

// dropConnLocked forgets the brokers whose last registration came over c.
func (s *Server) dropConnLocked(c net.Conn) {
	for addr, lb := range s.live {
		if lb.conn == c {
			s.removeLocked(addr, "connection closed")
		}
	}
}

// expire forgets brokers silent for BrokerExpiry, checking every tenth of it (at most 10 s).
func (s *Server) expire() {
	defer s.wg.Done()
	every := min(s.cfg.BrokerExpiry/10, 10*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.mu.Lock()
			for addr, lb := range s.live {
				if now.Sub(lb.last) > s.cfg.BrokerExpiry {
					s.removeLocked(addr, fmt.Sprintf("no registration for %v", s.cfg.BrokerExpiry))
				}
			}
			s.mu.Unlock()
		}
	}
}

// route is GET_ROUTEINFO_BY_TOPIC's reply.
func (s *Server) route(req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	qs := s.topics[topic]
	if len(qs) == 0 {
		return req.Reply(respTopicNotExist, "No topic route info in name server for the topic: "+topic)
	}
	names := make([]string, 0, len(qs))
	for n := range qs {
		names = append(names, n)
	}
	sort.Strings(names)
	qds := make([]remoting.QueueData, 0, len(names))
	bds := make([]remoting.BrokerData, 0, len(names))
	for _, n := range names {
		qds = append(qds, qs[n])
		bds = append(bds, s.brokerData(n))
	}
	body := map[string]any{"queueDatas": qds, "brokerDatas": bds, "filterServerTable": map[string]any{}}
	if conf, ok := s.kv[OrderTopicConfig][topic]; ok {
		body["orderTopicConf"] = conf
	}
	r := req.Reply(respSuccess, "")
	// Cannot fail: strings, integers and maps with string keys only.
	r.Body, _ = json.Marshal(body)
	return r
}

func (s *Server) brokerData(name string) remoting.BrokerData {
	be := s.brokers[name]
	addrs := map[string]string{}
	for id, a := range be.addrs {
		addrs[strconv.FormatInt(id, 10)] = a
	}
	return remoting.BrokerData{Cluster: be.cluster, BrokerName: name, BrokerAddrs: addrs}
}

// clusterInfo is GET_BROKER_CLUSTER_INFO's reply.
func (s *Server) clusterInfo(req *remoting.Command) *remoting.Command {
	bt := map[string]remoting.BrokerData{}
	ct := map[string][]string{}
	for n, be := range s.brokers {
		bt[n] = s.brokerData(n)
		ct[be.cluster] = append(ct[be.cluster], n)
	}
	for _, ns := range ct {
		sort.Strings(ns)
	}
	r := req.Reply(respSuccess, "")
	// Cannot fail: strings, integers and maps with string keys only.
	r.Body, _ = json.Marshal(map[string]any{"brokerAddrTable": bt, "clusterAddrTable": ct})
	return r
}

// topicList lists the topics with a route; cluster, when set, keeps those with queues on
// one of its brokers.
func (s *Server) topicList(req *remoting.Command, cluster string) *remoting.Command {
	names := []string{}
	for t, qs := range s.topics {
		keep := cluster == ""
		for n := range qs {
			if be := s.brokers[n]; be != nil && be.cluster == cluster {
				keep = true
			}
		}
		if keep {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	r := req.Reply(respSuccess, "")
	// Cannot fail: strings, integers and maps with string keys only.
	r.Body, _ = json.Marshal(map[string]any{"topicList": names})
	return r
}

// updateKV puts or deletes one KV configuration item, durably before it answers.
func (s *Server) updateKV(req *remoting.Command) *remoting.Command {
	ns, key := req.Ext("namespace"), req.Ext("key")
	if ns == "" || key == "" {
		return req.Reply(respInvalidArgument, "KV configuration: namespace and key are required")
	}
	old, had := s.kv[ns][key]
	if req.Code == codePutKVConfig {
		if s.kv[ns] == nil {
			s.kv[ns] = map[string]string{}
		}
		s.kv[ns][key] = req.Ext("value")
	} else {
		delete(s.kv[ns], key)
		if len(s.kv[ns]) == 0 {
			delete(s.kv, ns)
		}
	}
	if err := s.saveKV(); err != nil {
		// Undo: what is not stored is not acknowledged.
		if had {
			if s.kv[ns] == nil {
				s.kv[ns] = map[string]string{}
			}
			s.kv[ns][key] = old
		} else if s.kv[ns] != nil {
			delete(s.kv[ns], key)
		}
		return req.Reply(respSystemError, "KV configuration not stored: "+err.Error())
	}
	return req.Reply(respSuccess, "")
}

// saveKV replaces Dir/kvConfig.json (RocketMQ's file and layout) atomically and durably.
func (s *Server) saveKV() error {
	if s.cfg.Dir == "" {
		return nil
	}
	data, err := json.Marshal(map[string]any{"configTable": s.kv})
	if err != nil {
		return err
	}
	path := s.kvPath()
	if err := durable.WriteFile(s.cfg.fs, path, data, 0o644); err != nil {
		return fmt.Errorf("namesrv: write %s: %w", path, err)
	}
	return nil
}
