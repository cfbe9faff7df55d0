package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// Consumer-group offsets live in three files of the store directory:
//
//	offsets.json     a snapshot: group -> "topic@queue" -> next offset to consume
//	offsets.log      a journal of every commit since the snapshot, one record each
//	offsets.log.old  the previous journal while a snapshot is being written
//
// A commit is written to the journal (one write, no fsync) before it becomes visible, so
// a process crash (kill -9) loses no acknowledged or one-way commit: the page cache belongs
// to the kernel. Every checkpoint compacts: the journal is set aside as offsets.log.old, a
// new one started, the snapshot rewritten (fsynced), and the old journal removed. Opening
// applies the snapshot, then offsets.log.old, then offsets.log; later records win, so a
// crash at any step of a compaction loses nothing. A machine crash loses the commits since
// the last checkpoint (Config.CheckpointInterval).
//
// Journal record: uint32 payload length, uint32 CRC-32 (IEEE) of the payload, payload =
// uvarint group length, group, uvarint key length, key, varint offset. The first record
// that does not decode ends the journal (a torn tail).

const (
	offsetsSnapshot   = "offsets.json"
	offsetsJournal    = "offsets.log"
	offsetsJournalOld = "offsets.log.old"
	maxJournalRecord  = 1 << 16
)

// offsetStore holds the committed offsets. mu guards m, j and jlen; the journal write and
// the map update happen under it, so the journal order is the commit order.
type offsetStore struct {
	fs  storeFS
	dir string

	mu   sync.Mutex
	m    map[string]map[string]int64
	j    journalFile
	jlen int64 // bytes in the current journal
	buf  []byte
	// keptJournals: the store opened on a full disk, so the snapshot on disk lacks what
	// the journals hold (offsets.log.old too); the next compaction writes the snapshot
	// before it drops any journal.
	keptJournals bool
}

func openOffsets(fs storeFS, dir string) (*offsetStore, error) {
	s := &offsetStore{fs: fs, dir: dir, m: map[string]map[string]int64{}}
	if err := readJSON(fs, s.path(offsetsSnapshot), &s.m); err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]map[string]int64{}
	}
	valid := int64(0) // the journal's records that decode
	for _, name := range []string{offsetsJournalOld, offsetsJournal} {
		data, err := fs.ReadFile(s.path(name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		recs, n, _ := decodeOffsetJournal(data)
		for _, r := range recs {
			s.set(r.group, r.key, r.offset)
		}
		if name == offsetsJournal {
			valid = int64(n)
		}
	}
	// Start from a clean snapshot and an empty journal.
	if err := s.writeSnapshot(s.snapshotLocked()); err != nil {
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
			return nil, err
		}
		// A full disk: keep the journals as they are and go on appending to the current
		// one, after its last whole record (cutting a torn tail needs no space).
		s.fs.Remove(s.path(offsetsSnapshot) + ".tmp")
		j, err := fs.OpenJournal(s.path(offsetsJournal), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		if err := j.Truncate(valid); err != nil {
			j.Close()
			return nil, fmt.Errorf("broker: %w", err)
		}
		if _, err := j.Seek(valid, 0); err != nil {
			j.Close()
			return nil, fmt.Errorf("broker: %w", err)
		}
		s.j, s.jlen, s.keptJournals = j, valid, true
		return s, nil
	}
	s.fs.Remove(s.path(offsetsJournalOld))
	j, err := s.fs.OpenJournal(s.path(offsetsJournal), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	s.j = j
	return s, nil
}

func (s *offsetStore) path(name string) string { return filepath.Join(s.dir, name) }

func (s *offsetStore) set(group, key string, off int64) {
	g := s.m[group]
	if g == nil {
		g = map[string]int64{}
		s.m[group] = g
	}
	g[key] = off
}

// commit journals and stores one offset.
func (s *offsetStore) commit(group, key string, off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.j == nil {
		return ErrClosed
	}
	s.buf = appendOffsetRecord(s.buf[:0], group, key, off)
	if n, err := s.j.Write(s.buf); err != nil || n < len(s.buf) {
		if err == nil {
			err = io.ErrShortWrite
		}
		// Cut what part of the record reached the file: a torn record ends the journal on
		// the next open, and the commits appended after it would be lost.
		if terr := s.j.Truncate(s.jlen); terr == nil {
			s.j.Seek(s.jlen, io.SeekStart)
		} else {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("broker: write offset journal: %w", err)
	}
	s.jlen += int64(len(s.buf))
	s.set(group, key, off)
	return nil
}

func (s *offsetStore) get(group, key string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.m[group][key]
	return o, ok
}

// groups returns a copy of every group's offsets.
func (s *offsetStore) groups() map[string]map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]int64, len(s.m))
	for g, offs := range s.m {
		c := make(map[string]int64, len(offs))
		for k, v := range offs {
			c[k] = v
		}
		out[g] = c
	}
	return out
}

func (s *offsetStore) snapshotLocked() []byte {
	data := plainJSON(s.m)
	return data
}

func (s *offsetStore) writeSnapshot(data []byte) error {
	return writeFile(s.fs, s.path(offsetsSnapshot), data)
}

// compact rewrites the snapshot when the journal holds records (or force).
func (s *offsetStore) compact(force bool) error {
	s.mu.Lock()
	if s.j == nil || (s.jlen == 0 && !force) {
		s.mu.Unlock()
		return nil
	}
	data := s.snapshotLocked()
	if s.keptJournals {
		// The journals hold records the snapshot lacks: write it before dropping them,
		// holding the lock so that no commit falls between.
		defer s.mu.Unlock()
		if err := s.writeSnapshot(data); err != nil {
			return err
		}
		s.fs.Remove(s.path(offsetsJournalOld))
		if err := s.j.Truncate(0); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		if _, err := s.j.Seek(0, 0); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		s.jlen, s.keptJournals = 0, false
		return nil
	}
	if s.jlen > 0 {
		if err := s.fs.Rename(s.path(offsetsJournal), s.path(offsetsJournalOld)); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("broker: %w", err)
		}
		j, err := s.fs.OpenJournal(s.path(offsetsJournal), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("broker: %w", err)
		}
		s.j.Close()
		s.j, s.jlen = j, 0
	}
	s.mu.Unlock()
	if err := s.writeSnapshot(data); err != nil {
		return err
	}
	if err := s.fs.Remove(s.path(offsetsJournalOld)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}

func (s *offsetStore) close() error {
	err := s.compact(true)
	s.mu.Lock()
	if s.j != nil {
		s.j.Close()
		s.j = nil
	}
	s.mu.Unlock()
	return err
}

type offsetRecord struct {
	group, key string
	offset     int64
}

func appendOffsetRecord(dst []byte, group, key string, off int64) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(group)))
	dst = append(dst, group...)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendVarint(dst, off)
	p := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.ChecksumIEEE(p))
	return dst
}

// JournalError says where and why an offset journal stops decoding.
type JournalError struct {
	Offset int
	Reason string
}

func (e *JournalError) Error() string {
	return fmt.Sprintf("broker: offset journal record at byte %d: %s", e.Offset, e.Reason)
}

// decodeOffsetJournal decodes records until the data ends or one is malformed; it returns
// the records, the length of the valid prefix and, if the data did not end cleanly, why.
func decodeOffsetJournal(data []byte) ([]offsetRecord, int, error) {
	var out []offsetRecord
	at := 0
	for at < len(data) {
		rest := data[at:]
		bad := func(r string, a ...any) ([]offsetRecord, int, error) {
			return out, at, &JournalError{Offset: at, Reason: fmt.Sprintf(r, a...)}
		}
		if len(rest) < 8 {
			return bad("truncated header (%d bytes)", len(rest))
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n > maxJournalRecord || n > len(rest)-8 {
			return bad("payload length %d exceeds the %d bytes left", n, len(rest)-8)
		}
		p := rest[8 : 8+n]
		if crc32.ChecksumIEEE(p) != binary.BigEndian.Uint32(rest[4:]) {
			return bad("checksum mismatch")
		}
		var r offsetRecord
		var ok bool
		if r.group, p, ok = uvarintString(p); !ok {
			return bad("bad group")
		}
		if r.key, p, ok = uvarintString(p); !ok {
			return bad("bad key")
		}
		v, k := binary.Varint(p)
		if k <= 0 || k != len(p) || k != len(binary.AppendVarint(nil, v)) {
			return bad("bad offset")
		}
		r.offset = v
		out = append(out, r)
		at += 8 + n
	}
	return out, at, nil
}

func uvarintString(p []byte) (string, []byte, bool) {
	l, k := binary.Uvarint(p)
	if k <= 0 || k != len(binary.AppendUvarint(nil, l)) || l > uint64(len(p)-k) {
		return "", p, false
	}
	return string(p[k : k+int(l)]), p[k+int(l):], true
}

func offsetKey(topicName string, queue int) string { return topicName + "@" + strconv.Itoa(queue) }

// splitOffsetKey is the inverse of offsetKey.
func splitOffsetKey(k string) (string, int, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '@' {
			q, err := strconv.Atoi(k[i+1:])
			return k[:i], q, err == nil
		}
	}
	return "", 0, false
}

// CommitOffset stores a consumer group's next offset for a queue. It is journalled before
// it returns, so it survives a crash of the process.
func (b *Broker) CommitOffset(group, topicName string, queue int, offset int64) error {
	return b.offsets.commit(group, offsetKey(topicName, queue), offset)
}

// QueryOffset returns a group's committed offset; ok is false when none is stored.
func (b *Broker) QueryOffset(group, topicName string, queue int) (int64, bool) {
	return b.offsets.get(group, offsetKey(topicName, queue))
}

// GroupOffset is one committed offset.
type GroupOffset struct {
	Topic  string
	Queue  int
	Offset int64
}

// GroupOffsets lists a group's committed offsets sorted by topic and queue.
func (b *Broker) GroupOffsets(group string) []GroupOffset {
	var out []GroupOffset
	for k, v := range b.offsets.groups()[group] {
		if t, q, ok := splitOffsetKey(k); ok {
			out = append(out, GroupOffset{Topic: t, Queue: q, Offset: v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

// ConsumerGroups lists the groups with committed offsets, sorted.
func (b *Broker) ConsumerGroups() []string {
	var out []string
	for g := range b.offsets.groups() {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
