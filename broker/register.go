package broker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"rsql/broker/namesrv"
	"rsql/broker/remoting"
)

// A broker started with Config.NameServers registers with each of them as RocketMQ brokers
// do (REGISTER_BROKER: its name, cluster, id, address and whole topic table): at Serve, every
// Config.RegisterInterval (its heartbeat; a name server forgets a broker silent for its
// expiry, 120 s by default), and at once when its topic table changes, so that a topic
// created on it is in the routes when the create returns plus one round trip. Close
// unregisters it. Each name server has one connection, kept open (a name server also
// forgets the brokers of a connection that closes) and dialled again after a failure.

// nsLink is the connection to one name server; used only by registerLoop.
type nsLink struct {
	addr   string
	c      net.Conn
	failed bool // the last attempt failed (logged once until one succeeds)
}

// registerTimeout bounds one registration round trip.
const registerTimeout = 3 * time.Second

// call sends req and reads its reply. A kept connection that fails (the name server
// restarted) is replaced by a new one at once, so one failure does not cost a register
// interval.
func (l *nsLink) call(s *netServer, req *remoting.Command) (*remoting.Command, error) {
	if l.c != nil {
		if resp, err := l.roundTrip(s, req); err == nil {
			return resp, nil
		}
	}
	return l.roundTrip(s, req)
}

func (l *nsLink) roundTrip(s *netServer, req *remoting.Command) (*remoting.Command, error) {
	if l.c == nil {
		c, err := net.DialTimeout("tcp", l.addr, registerTimeout)
		if err != nil {
			return nil, err
		}
		l.c = c
	}
	req.Opaque = s.opaque.Add(1)
	l.c.SetDeadline(time.Now().Add(registerTimeout))
	resp, err := remoting.RoundTrip(l.c, req, s.b.cfg.MaxFrameSize)
	if err != nil {
		l.c.Close()
		l.c = nil
		return nil, err
	}
	return resp, nil
}

// registerLoop keeps the broker registered until the server closes, then unregisters it.
func (s *netServer) registerLoop() {
	defer s.wg.Done()
	links := make([]*nsLink, len(s.b.cfg.NameServers))
	for i, a := range s.b.cfg.NameServers {
		links[i] = &nsLink{addr: a}
	}
	log := s.b.cfg.Logger
	boot := time.Now().UnixMilli()
	var version int64
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.done:
			for _, l := range links {
				req := s.registrationHeader(codeUnregisterBroker)
				if _, err := l.call(s, req); err != nil {
					log.Warn("unregister from name server", "namesrv", l.addr, "err", err)
				}
				if l.c != nil {
					l.c.Close()
				}
			}
			return
		case <-timer.C:
		case <-s.b.topicsChanged:
			version++
		}
		body := s.registrationBody(namesrv.DataVersion{Timestamp: boot, Counter: version})
		for _, l := range links {
			req := s.registrationHeader(codeRegisterBroker)
			req.Body = body
			req.ExtFields["bodyCrc32"] = strconv.FormatUint(uint64(namesrv.BodyCRC(body)), 10)
			resp, err := l.call(s, req)
			if err == nil && resp.Code != respSuccess {
				err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
			}
			switch {
			case err != nil && !l.failed:
				log.Warn("cannot register with name server (retrying every register interval)", "namesrv", l.addr, "err", err)
				l.failed = true
			case err == nil && l.failed:
				log.Info("registered with name server again", "namesrv", l.addr)
				l.failed = false
			case err == nil && version == 0:
				log.Info("registered with name server", "namesrv", l.addr, "broker", s.b.cfg.BrokerName, "addr", s.brokerAddr)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(s.b.cfg.RegisterInterval)
	}
}

const (
	codeRegisterBroker   = 103
	codeUnregisterBroker = 104
)

func (s *netServer) registrationHeader(code int16) *remoting.Command {
	return &remoting.Command{Code: code, Language: "GO", Version: 479, ExtFields: map[string]string{
		"brokerName": s.b.cfg.BrokerName, "brokerAddr": s.brokerAddr, "clusterName": s.b.cfg.ClusterName,
		"brokerId": strconv.Itoa(s.brokerID()), "haServerAddr": s.brokerAddr, "compressed": "false"}}
}

// registrationBody is the broker's topic table as a RegisterBrokerBody. A broker that
// creates topics on first send also lists TBW102, as RocketMQ's autoCreateTopicEnable does.
func (s *netServer) registrationBody(v namesrv.DataVersion) []byte {
	var body namesrv.RegisterBody
	table := map[string]namesrv.TopicConfig{}
	for _, t := range s.b.Topics() {
		table[t.Name] = namesrv.TopicConfig{TopicName: t.Name, ReadQueueNums: t.Queues, WriteQueueNums: t.Queues, Perm: t.Perm}
	}
	if _, ok := table[tbw102]; !ok && !s.b.cfg.DisableAutoCreate && s.b.cfg.Role == RoleMaster {
		n := s.b.cfg.DefaultQueues
		table[tbw102] = namesrv.TopicConfig{TopicName: tbw102, ReadQueueNums: n, WriteQueueNums: n, Perm: 7} // read, write, inherit
	}
	body.TopicConfigSerializeWrapper.TopicConfigTable = table
	body.TopicConfigSerializeWrapper.DataVersion = v
	body.FilterServerList = []string{}
	data := plainJSON(body)
	return data
}
