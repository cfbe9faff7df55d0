package listen

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Backoff paces the retries of one accept loop. The zero value is ready; it is used by the
// loop's goroutine only.
type Backoff struct {
	delay  time.Duration
	failed int // accept errors since the last success
}

// Backoff bounds, as net/http's Server.Serve has them.
const (
	firstDelay = 5 * time.Millisecond
	maxDelay   = time.Second
)

// Retry decides what an accept loop does after err. For a temporary error it logs (the
// first error of a run of failures, then every 100th), sleeps the next delay and returns
// true: accept again. Otherwise it returns false: the listener has stopped (the caller
// reports err, or nothing when it closed the listener itself). logf may be nil.
func (b *Backoff) Retry(err error, logf func(msg string, args ...any)) bool {
	if !Temporary(err) {
		return false
	}
	if b.delay == 0 {
		b.delay = firstDelay
	} else {
		b.delay = min(2*b.delay, maxDelay)
	}
	if logf != nil && b.failed%100 == 0 {
		logf("accept failed; retrying", "err", err, "retry_in", b.delay, "failures", b.failed+1)
	}
	b.failed++
	time.Sleep(b.delay)
	return true
}

// Accepted resets the backoff after a successful accept, logging the recovery when the
// loop had been failing.
func (b *Backoff) Accepted(logf func(msg string, args ...any)) {
	if b.failed > 0 && logf != nil {
		logf("accepting again", "failures", b.failed)
	}
	b.delay, b.failed = 0, 0
}

// Temporary reports whether an accept error may go away by itself: running out of file
// descriptors (EMFILE, ENFILE), buffers or memory, a connection reset or aborted before it
// was accepted, an interrupted call, a timeout. A closed listener (net.ErrClosed) is not.
func Temporary(err error) bool {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO,
		syscall.EPERM, syscall.ETIMEDOUT, syscall.ENETDOWN, syscall.ENETUNREACH, syscall.EHOSTUNREACH} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// IsLoopback reports whether addr (a host:port, as a listen or remote address is) names a
// loopback host: localhost, 127.0.0.0/8 or ::1 (an IPv4-mapped form too). The default
// authentication is trusted only there (docs/security.md).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
