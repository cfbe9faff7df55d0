package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
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

	cmu    sync.Mutex
	groups map[string]*consumerGroup

	lmu   sync.Mutex
	locks map[string]map[string]*mqLock // group -> "topic@broker@queue" -> holder

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
	remote netip.AddrPort
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
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = bufs.WriteTo(c.c)
	if err != nil {
		c.close()
	}
	return err
}

// Serve starts the name-server listener on namesrvAddr and the broker listener on
// brokerAddr (both serve every request code; routes advertise the broker listener). Use
// port 0 for a free port and read the bound addresses with Addrs. It returns once both
// listen.
func (b *Broker) Serve(namesrvAddr, brokerAddr string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if b.net != nil {
		return errors.New("broker: already serving")
	}
	s := &netServer{b: b, conns: map[*conn]struct{}{}, done: make(chan struct{}),
		groups: map[string]*consumerGroup{}, locks: map[string]map[string]*mqLock{}}
	bl, err := net.Listen("tcp", brokerAddr)
	if err != nil {
		return fmt.Errorf("broker: listen on broker address %s: %w", brokerAddr, err)
	}
	nl, err := net.Listen("tcp", namesrvAddr)
	if err != nil {
		bl.Close()
		return fmt.Errorf("broker: listen on name-server address %s: %w", namesrvAddr, err)
	}
	ap, _ := netip.ParseAddrPort(bl.Addr().String())
	if ap.Addr().IsUnspecified() {
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port())
	}
	s.brokerAddr = ap.String()
	s.nsAddr = nl.Addr().String()
	b.storeHost.Store(ap)
	s.lns = []net.Listener{nl, bl}
	b.net = s
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	s.wg.Add(1)
	go s.expireClients()
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
		c := &conn{c: nc, done: make(chan struct{})}
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
		c.close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.dropConn(c)
	}()
	log := s.b.cfg.Logger
	// At most maxInFlight requests of one connection run at once; beyond that the reader
	// stops reading (back-pressure instead of unbounded goroutines).
	const maxInFlight = 1024
	sem := make(chan struct{}, maxInFlight)
	for {
		// Clients heartbeat every 30 s; a connection silent for longer than the client
		// expiry (or stuck mid-frame) is closed.
		c.c.SetReadDeadline(time.Now().Add(s.b.cfg.ClientExpiry + 30*time.Second))
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
				if err := s.b.waitFlushed(end); err != nil {
					resp = cmd.Reply(respSystemError, err.Error())
				}
				c.send(resp)
			}()
			continue
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
