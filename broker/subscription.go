package broker

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"rsql/broker/filter"
)

// Expression types of a subscription.
const (
	ExprTag   = "TAG"
	ExprSQL92 = "SQL92"
)

// subFilter is what a subscription lets through: a set of tag hashes (checked on the
// consume queue) or a SQL92 selector (checked on each record's properties). A nil
// *subFilter lets everything through. Immutable once built.
type subFilter struct {
	typ  string
	expr string
	tags map[int64]bool // TAG: nil = every message
	sql  *filter.Expression
	err  error // the expression does not compile: pulls with it are refused (code 23)
}

// newSubFilter compiles a subscription expression of type typ ("" is TAG).
func newSubFilter(typ, expr string) *subFilter {
	switch strings.ToUpper(typ) {
	case "", ExprTag:
		t := tagFilter(expr)
		if t == nil {
			return nil
		}
		return &subFilter{typ: ExprTag, expr: expr, tags: t}
	case ExprSQL92:
		f := &subFilter{typ: ExprSQL92, expr: expr}
		f.sql, f.err = filter.Parse(expr)
		return f
	}
	return &subFilter{typ: typ, expr: expr, err: fmt.Errorf("expression type %q is not supported (want TAG or SQL92)", typ)}
}

// tagFilter parses a TAG expression; nil means everything.
func tagFilter(expr string) map[int64]bool {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil
	}
	f := map[int64]bool{}
	for _, p := range strings.Split(expr, "||") {
		if p = strings.TrimSpace(p); p != "" {
			if p == "*" {
				return nil
			}
			f[TagsCode(p)] = true
		}
	}
	if len(f) == 0 {
		return nil
	}
	return f
}

// matchCode checks a consume-queue entry's tag hash.
func (f *subFilter) matchCode(tags int64) bool {
	return f == nil || f.tags == nil || f.tags[tags]
}

// needsRecord reports whether matchRecord must see the stored record.
func (f *subFilter) needsRecord() bool { return f != nil && f.sql != nil }

// matchRecord evaluates the SQL92 selector over a stored record's properties (TAGS and
// KEYS included). A record whose properties cannot be located does not match.
func (f *subFilter) matchRecord(rec []byte) bool {
	if f == nil || f.sql == nil {
		return true
	}
	props, ok := recordProps(rec)
	if !ok {
		return false
	}
	return f.sql.Match(func(name string) (string, bool) { return propLookup(props, name) })
}

// recordProps locates the properties of a stored record without validating the rest.
func recordProps(rec []byte) ([]byte, bool) {
	if len(rec) < recordFixedSize {
		return nil, false
	}
	p := 88 + int(binary.BigEndian.Uint32(rec[84:]))
	if p < 88 || p+1 > len(rec) {
		return nil, false
	}
	p += 1 + int(rec[p])
	if p+2 > len(rec) {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(rec[p:]))
	p += 2
	if p+n > len(rec) {
		return nil, false
	}
	return rec[p : p+n], true
}

// propLookup finds one property; ok is false when it is absent.
func propLookup(b []byte, key string) (string, bool) {
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 2 {
			i++
		}
		ent := b[:i]
		if i < len(b) {
			b = b[i+1:]
		} else {
			b = nil
		}
		if len(ent) > len(key) && ent[len(key)] == 1 && string(ent[:len(key)]) == key {
			return string(ent[len(key)+1:]), true
		}
	}
	return "", false
}

// filterCache keeps compiled filters of pulls that carry their subscription, so a
// selector is compiled once, not at every pull.
type filterCache struct {
	mu sync.Mutex
	m  map[[2]string]*subFilter
}

func (c *filterCache) get(typ, expr string) *subFilter {
	k := [2]string{strings.ToUpper(typ), expr}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.m[k]; ok {
		return f
	}
	if c.m == nil || len(c.m) >= 1024 {
		c.m = map[[2]string]*subFilter{}
	}
	f := newSubFilter(typ, expr)
	c.m[k] = f
	return f
}
