package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"rsql/broker/remoting"
	"rsql/internal/listen"
)

// netServer runs the two listeners. Each connection has one reader goroutine; every request
// is handled on its own goroutine (long polls must not block other requests), and replies
// are written whole under the connection's write lock, in completion order.
type netServer struct {
	b          *Broker
	lns        []net.Listener
	brokerAddr string // advertised in routes
	nsAddr     string
	opaque     atomic.Int32

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
	done  chan struct{}

	cmu       sync.Mutex
	groups    map[string]*consumerGroup
	producers map[string]map[string]*clientInfo // producer group -> client id -> client

	lmu   sync.Mutex
	locks map[string]map[string]*mqLock // group -> "topic@broker@queue" -> holder

	filters filterCache

	acl *acl // nil: access control off

	stopped atomic.Pointer[stoppedErr] // why a listener stopped accepting, if one did
}

type stoppedErr struct{ err error }

// ServeErr returns why one of the listeners Serve started stopped accepting, or nil while
// they accept (or before Serve).
func (b *Broker) ServeErr() error {
	if b.net == nil {
		return nil
	}
	if st := b.net.stopped.Load(); st != nil {
		return st.err
	}
	return nil
}

type conn struct {
	c      net.Conn
	wmu    sync.Mutex
	done   chan struct{}
	closed atomic.Bool
	// wdead is set when a write failed (the peer closed or reset the connection). Later
	// replies are dropped, but the reader goes on: requests the peer wrote before it closed
	// (one-way offset commits, typically) are still in the socket buffer and are handled.
	// Guarded by wmu.
	wdead  bool
	remote netip.AddrPort
	// namesrv: accepted on the name-server listener (its requests are not ACL-checked).
	namesrv bool
}

func (c *conn) close() {
	if !c.closed.Swap(true) {
		close(c.done)
		c.c.Close()
	}
}

// send writes one command; body is written after the header without copying.
func (c *conn) send(cmd *remoting.Command) error {
	body := cmd.Body
	cmd.Body = nil
	hdr, err := remoting.Encode(make([]byte, 0, 256), cmd)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(hdr, uint32(len(hdr)-4+len(body)))
	bufs := net.Buffers{hdr}
	if len(body) > 0 {
		bufs = append(bufs, body)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() || c.wdead {
		return net.ErrClosed
	}
	c.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = bufs.WriteTo(c.c)
	if err != nil {
		// Do not close: closing would discard frames the peer sent before it went away.
		// The reader ends the connection when it reaches the end of the stream (or its
		// read deadline, if the peer vanished without a trace).
		c.wdead = true
	}
	return err
}

// Serve starts the name-server listener on namesrvAddr and the broker listener on
// brokerAddr (both serve every request code; routes advertise the broker listener). Use
// port 0 for a free port and read the bound addresses with Addrs. An empty namesrvAddr
// starts the broker listener alone (a broker that registers with name servers of its own,
// Config.NameServers). It returns once they listen.
func (b *Broker) Serve(namesrvAddr, brokerAddr string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if b.net != nil {
		return errors.New("broker: already serving")
	}
	s := &netServer{b: b, conns: map[*conn]struct{}{}, done: make(chan struct{}),
		groups: map[string]*consumerGroup{}, producers: map[string]map[string]*clientInfo{},
		locks: map[string]map[string]*mqLock{}}
	if b.cfg.ACLFile != "" {
		a, err := openACL(b.cfg.fs, b.cfg.ACLFile, b.cfg.ACLReloadInterval, b.cfg.Logger)
		if err != nil {
			return err
		}
		s.acl = a
	}
	bl, err := net.Listen("tcp", brokerAddr)
	if err != nil {
		return fmt.Errorf("broker: listen on broker address %s: %w", brokerAddr, err)
	}
	s.lns = []net.Listener{bl}
	if namesrvAddr != "" {
		nl, err := net.Listen("tcp", namesrvAddr)
		if err != nil {
			bl.Close()
			return fmt.Errorf("broker: listen on name-server address %s: %w", namesrvAddr, err)
		}
		s.nsAddr = nl.Addr().String()
		s.lns = append(s.lns, nl)
	}
	ap, _ := netip.ParseAddrPort(bl.Addr().String())
	if ap.Addr().IsUnspecified() {
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port())
	}
	s.brokerAddr = ap.String()
	if b.cfg.AdvertiseAddr != "" {
		s.brokerAddr = b.cfg.AdvertiseAddr
		if a, err := netip.ParseAddrPort(b.cfg.AdvertiseAddr); err == nil {
			ap = a // message ids name the address clients reach
		}
	}
	b.storeHost.Store(ap)
	b.repl.advertise.Store(s.brokerAddr)
	b.net = s
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	s.wg.Add(2)
	go s.expireClients()
	go s.checkTransactions()
	if len(b.cfg.NameServers) > 0 {
		s.wg.Add(1)
		go s.registerLoop()
	}
	if s.acl != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.acl.watch(s.done) }()
	}
	return nil
}

// Addrs returns the bound name-server and broker addresses (empty before Serve).
func (b *Broker) Addrs() (namesrv, broker string) {
	if b.net == nil {
		return "", ""
	}
	return b.net.nsAddr, b.net.brokerAddr
}

func (s *netServer) close() {
	close(s.done)
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// accept serves ln until close. A temporary accept error (file descriptors running out,
// say) is logged and retried with backoff (internal/listen); any other stops this listener
// and is kept for ServeErr.
func (s *netServer) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff listen.Backoff
	logf := func(msg string, args ...any) {
		s.b.cfg.Logger.Warn(msg, append(args, "listener", ln.Addr().String())...)
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if backoff.Retry(err, logf) {
				continue
			}
			s.b.cfg.Logger.Error("listener stopped", "listener", ln.Addr().String(), "err", err)
			s.stopped.CompareAndSwap(nil, &stoppedErr{fmt.Errorf("broker listener %s stopped: %w", ln.Addr(), err)})
			return
		}
		backoff.Accepted(logf)
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		// The name-server listener, when there is one, is the second (Serve).
		c := &conn{c: nc, done: make(chan struct{}), namesrv: len(s.lns) > 1 && ln == s.lns[1]}
		c.remote, _ = netip.ParseAddrPort(nc.RemoteAddr().String())
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

func (s *netServer) serveConn(c *conn) {
	defer s.wg.Done()
	defer func() {
		// The connection's clients leave their groups before it is closed, so a client
		// that sees the close finds the groups without them (as RocketMQ's channel close
		// event unregisters them).
		s.dropConn(c)
		c.close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	log := s.b.cfg.Logger
	// At most maxInFlight requests of one connection run at once; beyond that the reader
	// stops reading (back-pressure instead of unbounded goroutines).
	const maxInFlight = 1024
	sem := make(chan struct{}, maxInFlight)
	for {
		// Clients heartbeat every 30 s; a connection silent for the client expiry (or stuck
		// mid-frame) is closed, as RocketMQ closes channels idle for 120 s.
		c.c.SetReadDeadline(time.Now().Add(s.b.cfg.ClientExpiry))
		p, err := remoting.ReadFrame(c.c, s.b.cfg.MaxFrameSize, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !c.closed.Load() {
				log.Warn("closing connection", "remote", c.c.RemoteAddr().String(), "err", err)
			}
			return
		}
		cmd, err := remoting.Decode(p)
		if err != nil {
			log.Warn("closing connection", "remote", c.c.RemoteAddr().String(), "err", err)
			return
		}
		if cmd.IsResponse() {
			continue // replies to our notifications
		}
		if s.acl != nil {
			if reason := s.acl.check(cmd, c.remote.Addr(), c.namesrv); reason != "" {
				if resp := s.acl.refusal(cmd, c.remote.Addr(), reason); resp != nil {
					c.send(resp)
				}
				continue
			}
		}
		if isSend(cmd.Code) {
			// Sends are appended in the order they arrive on a connection (a producer that
			// pipelines keyed messages keeps their order); only the flush wait and the
			// reply run on their own goroutine.
			resp, end := s.send(c, cmd)
			if end == 0 {
				c.send(resp)
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				c.send(s.finishSend(cmd, resp, end))
			}()
			continue
		}
		switch cmd.Code {
		case codeUpdateConsumerOff, codeQueryConsumerOff:
			// Offset commits are applied (and journalled) on the reader, in arrival order,
			// before the next frame is read: the one-way commits a consumer writes just
			// before it closes the connection are stored before the close is seen, and a
			// later commit on this connection never loses to an earlier one.
			c.send(s.handle(c, cmd))
			continue
		case codePullMessage:
			// The commit a pull carries is ordered the same way; the pull itself may wait.
			s.pullCommit(cmd)
		}
		sem <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer func() { <-sem; s.wg.Done() }()
			resp := s.handle(c, cmd)
			if resp != nil {
				c.send(resp)
			}
		}()
	}
}

// notify sends a one-way request to a client.
func (s *netServer) notify(c *conn, code int16, ext map[string]string) {
	cmd := &remoting.Command{Code: code, Language: "GO", Version: 479, Opaque: s.opaque.Add(1),
		Flag: remoting.FlagOneway, ExtFields: ext}
	c.send(cmd)
}

func isSend(code int16) bool {
	return code == codeSendMessage || code == codeSendMessageV2 || code == codeSendBatch || code == codeSendReply
}

// brokerAddrs is the route's address table of this broker name: a master lists itself as
// 0 and its live slave as 1; a slave lists its master as 0 and itself as 1 while the master
// answers, and itself as 0 while it does not (standing in, read-only, so that clients that
// only look for id 0 — the Go client's offset and lock requests — keep working).
func (s *netServer) brokerAddrs() map[string]string {
	if s.b.cfg.Role == RoleSlave {
		if s.standIn() {
			return map[string]string{"0": s.brokerAddr}
		}
		return map[string]string{"0": s.b.cfg.MasterAddr, "1": s.brokerAddr}
	}
	m := map[string]string{"0": s.brokerAddr}
	if slaves, _, _ := s.b.replM.live(); len(slaves) > 0 {
		sort.Strings(slaves)
		m["1"] = slaves[0]
	}
	return m
}

// standIn reports whether this is a slave whose master does not answer.
func (s *netServer) standIn() bool { return s.b.cfg.Role == RoleSlave && !s.b.repl.masterLive() }

// brokerID is 0 for a master, 1 for a slave.
func (s *netServer) brokerID() int {
	if s.b.cfg.Role == RoleSlave {
		return 1
	}
	return 0
}

// roleName is the broker's role as RocketMQ names it.
func (s *netServer) roleName() string {
	switch {
	case s.b.cfg.Role == RoleSlave:
		return "SLAVE"
	case s.b.cfg.Replication == ReplicationSync:
		return "SYNC_MASTER"
	}
	return "ASYNC_MASTER"
}

// finishSend waits until a stored send is as durable as promised (fsync, a slave) and
// returns its reply: unchanged, or with RocketMQ's code when a slave did not confirm it
// (the message is stored; the client reports the status), or an error.
func (s *netServer) finishSend(req, resp *remoting.Command, end int64) *remoting.Command {
	if err := s.b.waitDurable(end); err != nil {
		code := durabilityCode(err)
		if code == respSystemError {
			return req.Reply(code, err.Error())
		}
		resp.Code, resp.Remark = code, err.Error()
	}
	return resp
}

// durabilityCode maps a waitDurable error to a reply code.
func durabilityCode(err error) int16 {
	switch {
	case errors.Is(err, ErrSlaveNotAvailable):
		return respSlaveNotAvailable
	case errors.Is(err, ErrSlaveTimeout):
		return respFlushSlaveTimeout
	}
	return respSystemError
}
