package broker

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// addrPattern is a white-listed remote address of RocketMQ's ACL file, in one of its forms:
//
//   - *.*.*.*   *:*:*:*:*:*:*:*        every address
//     192.168.0.1   ::1                    one address
//     192.168.0.1,192.168.0.2              a list
//     192.168.0.{1,2}   1050::5:{1,2}      a list sharing a prefix
//     192.168.*.*   192.168.1-10.*   192.168.*.   1050::5:600:300c:*   ranges per segment
//
// A segment of a range is a number, *, or low-high (IPv6 segments in hex). Missing
// trailing segments are *. An IPv4-mapped IPv6 remote address matches as IPv4.
type addrPattern struct {
	text string
	all  bool
	set  []netip.Addr // exact addresses
	v6   bool         // segs are IPv6 groups
	segs [][2]uint16  // inclusive range per segment: 4 (IPv4) or 8 (IPv6)
}

func (p *addrPattern) String() string { return p.text }

// match reports whether a remote address is one the pattern allows.
func (p *addrPattern) match(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if p.all {
		return true
	}
	if slices.Contains(p.set, a) {
		return true
	}
	if p.segs == nil || p.v6 != a.Is6() {
		return false
	}
	b := a.AsSlice()
	for i, r := range p.segs {
		var v uint16
		if p.v6 {
			v = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			v = uint16(b[i])
		}
		if v < r[0] || v > r[1] {
			return false
		}
	}
	return true
}

// parseAddrPattern parses one pattern; "" is nil (matches nothing), as RocketMQ reads a
// blank whiteRemoteAddress.
func parseAddrPattern(s string) (*addrPattern, error) {
	s = strings.TrimSpace(s)
	p := &addrPattern{text: s}
	switch {
	case s == "":
		return nil, nil
	case s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*":
		p.all = true
	case strings.HasSuffix(s, "}"):
		open := strings.LastIndexByte(s, '{')
		prefix := s[:max(open, 0)]
		if open < 0 || !strings.HasSuffix(prefix, ".") && !strings.HasSuffix(prefix, ":") {
			return nil, fmt.Errorf("address pattern %q: a {a,b} list must follow a prefix ending in . or :", s)
		}
		for _, item := range strings.Split(s[open+1:len(s)-1], ",") {
			if err := p.addExact(s, prefix+strings.TrimSpace(item)); err != nil {
				return nil, err
			}
		}
	case strings.Contains(s, ","):
		for _, item := range strings.Split(s, ",") {
			if err := p.addExact(s, strings.TrimSpace(item)); err != nil {
				return nil, err
			}
		}
	case strings.ContainsAny(s, "*-"):
		if err := p.parseRange(s); err != nil {
			return nil, err
		}
	default:
		if err := p.addExact(s, s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *addrPattern) addExact(pattern, s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("address pattern %q: %q is not an IPv4 or IPv6 address", pattern, s)
	}
	p.set = append(p.set, a.Unmap().WithZone(""))
	return nil
}

// parseRange reads a pattern with * or low-high segments.
func (p *addrPattern) parseRange(s string) error {
	var parts []string
	n, base, limit := 4, 10, 255
	if strings.Contains(s, ":") {
		p.v6, n, base, limit = true, 8, 16, 0xffff
		left, right, double := strings.Cut(s, "::")
		if double {
			var l, r []string
			if left != "" {
				l = strings.Split(left, ":")
			}
			if right != "" {
				r = strings.Split(right, ":")
			}
			if len(l)+len(r) >= n || strings.Contains(right, "::") {
				return fmt.Errorf("address pattern %q: not an IPv6 pattern", s)
			}
			parts = append(l, make([]string, n-len(l)-len(r))...)
			for i := len(l); i < n-len(r); i++ {
				parts[i] = "0"
			}
			parts = append(parts, r...)
		} else {
			parts = strings.Split(s, ":")
		}
	} else {
		parts = strings.Split(strings.TrimSuffix(s, "."), ".")
	}
	if len(parts) > n {
		return fmt.Errorf("address pattern %q has more than %d segments", s, n)
	}
	for len(parts) < n {
		parts = append(parts, "*")
	}
	for i, seg := range parts {
		seg = strings.TrimSpace(seg)
		num := func(t string) (uint16, error) {
			v, err := strconv.ParseUint(t, base, 32)
			if err != nil || v > uint64(limit) {
				return 0, fmt.Errorf("address pattern %q: segment %d %q is not a number, *, or low-high within 0-%d", s, i+1, seg, limit)
			}
			return uint16(v), nil
		}
		var r [2]uint16
		switch lo, hi, isRange := strings.Cut(seg, "-"); {
		case seg == "*":
			r = [2]uint16{0, uint16(limit)}
		case isRange:
			a, err := num(lo)
			if err != nil {
				return err
			}
			b, err := num(hi)
			if err != nil {
				return err
			}
			if a > b {
				return fmt.Errorf("address pattern %q: segment %d range %q runs backwards", s, i+1, seg)
			}
			r = [2]uint16{a, b}
		default:
			v, err := num(seg)
			if err != nil {
				return err
			}
			r = [2]uint16{v, v}
		}
		p.segs = append(p.segs, r)
	}
	return nil
}
