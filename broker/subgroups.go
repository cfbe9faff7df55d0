package broker

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// SubscriptionGroup is a consumer group's configuration, as RocketMQ's admin tools read and
// write it (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP). A group
// is created with the defaults at its first heartbeat. ConsumeEnable false makes the
// broker refuse the group's pulls (code 16); the other fields are kept for the tools.
type SubscriptionGroup struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int               `json:"retryQueueNums"`
	RetryMaxTimes                  int               `json:"retryMaxTimes"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int               `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int               `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes,omitempty"`
}

// DefaultSubscriptionGroup is the configuration a group gets when it first appears.
func DefaultSubscriptionGroup(name string) SubscriptionGroup {
	return SubscriptionGroup{GroupName: name, ConsumeEnable: true, ConsumeFromMinEnable: true,
		ConsumeBroadcastEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15}
}

// dataVersion is RocketMQ's change stamp of a table.
type dataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// subGroups is the persisted table (Dir/subscriptionGroups.json, replaced atomically on
// every change). mu guards it.
type subGroups struct {
	fs      storeFS
	path    string
	mu      sync.Mutex
	groups  map[string]SubscriptionGroup
	version dataVersion
}

type subGroupsFile struct {
	SubscriptionGroupTable map[string]SubscriptionGroup `json:"subscriptionGroupTable"`
	DataVersion            dataVersion                  `json:"dataVersion"`
}

func openSubGroups(fs storeFS, path string) (*subGroups, error) {
	var f subGroupsFile
	if err := readJSON(fs, path, &f); err != nil {
		return nil, err
	}
	s := &subGroups{fs: fs, path: path, groups: f.SubscriptionGroupTable, version: f.DataVersion}
	if s.groups == nil {
		s.groups = map[string]SubscriptionGroup{}
	}
	return s, nil
}

// encode renders the table as GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers it. Caller holds mu.
func (s *subGroups) encodeLocked() []byte {
	b := plainJSON(subGroupsFile{SubscriptionGroupTable: s.groups, DataVersion: s.version})
	return b
}

func (s *subGroups) saveLocked() error {
	s.version.Timestamp = time.Now().UnixMilli()
	s.version.Counter++
	return writeFile(s.fs, s.path, s.encodeLocked())
}

// ensure creates a group with the defaults if it is not known.
func (s *subGroups) ensure(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.groups[name]; ok {
		return nil
	}
	s.groups[name] = DefaultSubscriptionGroup(name)
	return s.saveLocked()
}

func (s *subGroups) get(name string) (SubscriptionGroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	return g, ok
}

func (s *subGroups) put(g SubscriptionGroup) error {
	if g.GroupName == "" {
		return fmt.Errorf("broker: subscription group without a name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[g.GroupName] = g
	return s.saveLocked()
}

func (s *subGroups) delete(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.groups[name]; !ok {
		return nil
	}
	delete(s.groups, name)
	return s.saveLocked()
}

func (s *subGroups) encode() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.encodeLocked()
}

// SubscriptionGroups lists the consumer groups' configurations, sorted by name.
func (b *Broker) SubscriptionGroups() []SubscriptionGroup {
	b.subs.mu.Lock()
	defer b.subs.mu.Unlock()
	out := make([]SubscriptionGroup, 0, len(b.subs.groups))
	for _, g := range b.subs.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	return out
}
