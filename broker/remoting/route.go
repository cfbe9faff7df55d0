package remoting

// QueueData is one broker's queues of a topic as a route lists them (the queueDatas of
// GET_ROUTEINFO_BY_TOPIC's JSON body).
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData is one broker's addresses by broker id, as routes and cluster information list
// them (brokerDatas, brokerAddrTable).
type BrokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}
