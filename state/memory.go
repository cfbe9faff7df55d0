package state

import (
	"bytes"
	"sort"
	"strings"
	"sync"
)

// Memory is an in-memory Store. The zero value is not usable; call NewMemory.
type Memory struct {
	mu     sync.RWMutex // guards m and closed
	m      map[string][]byte
	closed bool
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{m: make(map[string][]byte)} }

func (s *Memory) Get(key []byte) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	v, ok := s.m[string(key)]
	if !ok {
		return nil, false, nil
	}
	return append([]byte(nil), v...), true, nil
}

func (s *Memory) Put(key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.put(key, value)
	return nil
}

// put stores a copy; s.mu must be held for writing. A value of the same length as the
// one it replaces is copied over it: one lookup, and no map assignment (which would
// allocate the key as a string) — an operator's groups mostly keep their size.
func (s *Memory) put(key, value []byte) {
	old, ok := s.m[string(key)]
	switch {
	case ok && len(old) == len(value):
		copy(old, value)
	case ok && cap(old) >= len(value):
		s.m[string(key)] = append(old[:0], value...)
	default:
		s.m[string(key)] = append([]byte(nil), value...)
	}
}

func (s *Memory) Delete(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	delete(s.m, string(key))
	return nil
}

// sortedKeys returns the keys under prefix in order; s.mu must be held.
func (s *Memory) sortedKeys(prefix []byte) []string {
	var keys []string
	p := string(prefix)
	for k := range s.m {
		if strings.HasPrefix(k, p) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Scan holds a read lock for its whole duration: fn must not write to s.
func (s *Memory) Scan(prefix []byte, fn func(key, value []byte) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	for _, k := range s.sortedKeys(prefix) {
		if err := fn([]byte(k), s.m[k]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Memory) Write(b *Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return b.Each(func(kind OpKind, k, v []byte) error {
		switch kind {
		case OpPut:
			s.put(k, v)
		case OpDelete:
			delete(s.m, string(k))
		case OpDropPrefix:
			s.dropPrefix(k)
		}
		return nil
	})
}

func (s *Memory) Export(prefix []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	w := newExportWriter()
	for _, k := range s.sortedKeys(prefix) {
		w.add([]byte(k), s.m[k])
	}
	return w.finish(), nil
}

func (s *Memory) Import(blob []byte) error {
	b, err := importBatch(blob)
	if err != nil {
		return err
	}
	return s.Write(b)
}

func (s *Memory) DropPrefix(prefix []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.dropPrefix(prefix)
	return nil
}

func (s *Memory) dropPrefix(prefix []byte) {
	for k := range s.m {
		if bytes.HasPrefix([]byte(k), prefix) {
			delete(s.m, k)
		}
	}
}

func (s *Memory) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.m = nil
	return nil
}
