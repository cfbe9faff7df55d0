package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A materialized view's rows are state of its job (docs/sql.md, "Materialized views"):
// the stage that ends the view's query (SinkSpec.Connector "view") keeps each split's
// changes of the epoch folded, and at the checkpoint writes them into the checkpoint's
// batch, under the keys "view<stage>" / split (keys.go). They are committed with the
// offsets and the operator state that produced them, in one write: after a crash or a
// restart the view holds exactly what its committed input made of it, without replaying
// anything, and a reader of the store (ReadView) sees the rows of committed epochs only.
//
// What a key holds depends on the view's changelog:
//
//   - keyed (a changelog with a key, or one row: a global aggregate): key sql.AppendRow of
//     the key columns, value viewRow + sql.AppendRow of the row; a delete removes it;
//   - multiset (a retract changelog without a key: a global Top-N, an outer join): key
//     sql.AppendRow of the row, value viewCount + uvarint count;
//   - every row (an append-only query without a key: a projection, a join): key the epoch
//     (8 bytes, big-endian) and the row's number in it (uvarint), value viewRow + the row.
const (
	viewRow   = 1
	viewCount = 2
)

type viewMode int

const (
	viewKeyed viewMode = iota
	viewMultiset
	viewAll
)

// ViewOperator is the operator name of a view's rows in stage stage (keys.go).
func ViewOperator(stage int) string { return "view" + strconv.Itoa(stage) }

// tableOut ends the stage of a materialized view's job.
type tableOut struct {
	job   string
	stage int
	store state.Store
	mode  viewMode
	keys  []int
	width int  // the view's columns (the change column, if any, follows)
	fold  bool // rows carry the change column
	cnt   *counters
	pend  map[string]*viewPending
	enc   []byte
	// full asks the job for a checkpoint (once per checkpoint, asked) when the changes
	// held for the next one reach viewPendingMax entries, so that a view whose keys all
	// change between checkpoints holds a bounded part of them in memory.
	full  func()
	asked bool
}

// viewPendingMax is the folded changes a view's stage holds (its splits together) before
// it asks for a checkpoint: about what an aggregation's group cache holds.
const viewPendingMax = 4 * DefaultAggCacheGroups

// viewPending is one split's changes since its last checkpoint.
type viewPending struct {
	rows   map[string]sql.Row // keyed: the key's last row; nil: deleted
	counts map[string]int     // multiset: change of each row's count
	all    [][]byte           // every row: encoded rows in order
}

func newTableOut(job string, ps *planner.Stage, store state.Store, cnt *counters, global bool) (*tableOut, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: view %s keeps its rows in the store, and Env.Store is nil", ErrMissingEnv, ps.Sink.Stream)
	}
	s := ps.Sink
	t := &tableOut{job: job, stage: ps.ID, store: store, keys: s.KeyColumns, width: len(s.Schema), cnt: cnt,
		fold: s.Changes != planner.AppendOnly, pend: map[string]*viewPending{}}
	if t.fold {
		t.width--
	}
	switch {
	case s.Changes == planner.Retract && len(s.KeyColumns) == 0:
		t.mode = viewMultiset
	case s.Changes == planner.AppendOnly && len(s.KeyColumns) == 0 && !global:
		t.mode = viewAll
	}
	return t, nil
}

func (t *tableOut) split(name string) *viewPending {
	p := t.pend[name]
	if p == nil {
		p = &viewPending{rows: map[string]sql.Row{}, counts: map[string]int{}}
		t.pend[name] = p
	}
	return p
}

func (t *tableOut) Process(b *Batch) error {
	p := t.split(b.Split)
	for _, r := range b.Rows {
		del := t.fold && sql.IsDelete(r[t.width])
		row := r[:t.width]
		switch t.mode {
		case viewKeyed:
			t.enc = t.enc[:0]
			for _, k := range t.keys {
				t.enc = sql.AppendValue(t.enc, r[k])
			}
			if del {
				p.rows[string(t.enc)] = nil
			} else {
				p.rows[string(t.enc)] = append(sql.Row(nil), row...)
			}
		case viewMultiset:
			k := string(sql.AppendRow(t.enc[:0], row))
			if del {
				p.counts[k]--
			} else {
				p.counts[k]++
			}
		case viewAll:
			p.all = append(p.all, sql.AppendRow(nil, row))
		}
	}
	t.cnt.out.Add(int64(len(b.Rows)))
	if t.full != nil && !t.asked && t.pending() >= viewPendingMax {
		t.asked = true
		t.full()
	}
	return nil
}

// pending is the number of changes held for the next checkpoint.
func (t *tableOut) pending() int {
	n := 0
	for _, p := range t.pend {
		n += len(p.rows) + len(p.counts) + len(p.all)
	}
	return n
}

func (t *tableOut) Watermark(int64) error { return nil }
func (t *tableOut) End() error            { return nil }
func (t *tableOut) Close() error          { return nil }

func (t *tableOut) Control(c *Control) error {
	switch c.Kind {
	case Checkpoint:
		t.asked = false
		names := make([]string, 0, len(t.pend))
		for n := range t.pend {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := t.save(n, c.Epoch, c.State); err != nil {
				return err
			}
		}
	case RemoveSplit:
		if err := t.save(c.Split, c.Epoch, c.State); err != nil {
			return err
		}
		delete(t.pend, c.Split)
	}
	return nil
}

// save writes split's pending changes into b and forgets them. The previous checkpoint is
// committed when the next one is taken (stage.checkpoint), so the counts in the store are
// those of every earlier epoch.
func (t *tableOut) save(split string, epoch int64, b *state.Batch) error {
	p := t.pend[split]
	if p == nil {
		return nil
	}
	prefix := state.SplitPrefix(nil, t.job, ViewOperator(t.stage), split)
	key := func(k []byte) []byte { return append(append([]byte(nil), prefix...), k...) }
	for k, row := range p.rows {
		if row == nil {
			b.Delete(key([]byte(k)))
			continue
		}
		b.Put(key([]byte(k)), sql.AppendRow([]byte{viewRow}, row))
	}
	for k, d := range p.counts {
		if d == 0 {
			continue
		}
		sk := key([]byte(k))
		n := 0
		if v, ok, err := t.store.Get(sk); err != nil {
			return &StateError{Op: "view", Split: split, Err: err}
		} else if ok {
			if n, err = viewCountOf(v); err != nil {
				return &StateError{Op: "view", Split: split, Err: err}
			}
		}
		// A count may go below zero for a while (a delete that overtook its insert from
		// another split of the stage before): only rows counted above zero are the view's.
		if n += d; n == 0 {
			b.Delete(sk)
		} else {
			b.Put(sk, binary.AppendVarint([]byte{viewCount}, int64(n)))
		}
	}
	for i, enc := range p.all {
		k := binary.BigEndian.AppendUint64(nil, uint64(epoch))
		k = binary.AppendUvarint(k, uint64(i))
		b.Put(key(k), append([]byte{viewRow}, enc...))
	}
	delete(t.pend, split)
	return nil
}

var errBadViewRow = errors.New("corrupt view row")

// maxViewCount bounds how many times a multiset view may hold one row: a larger stored
// count is corrupt, not a reason to emit rows for minutes.
const maxViewCount = 1 << 24

func viewCountOf(v []byte) (int, error) {
	if len(v) < 2 || v[0] != viewCount {
		return 0, errBadViewRow
	}
	n, k := binary.Varint(v[1:])
	if k <= 0 || 1+k != len(v) {
		return 0, errBadViewRow
	}
	return int(n), nil
}

// ViewReader reads committed view rows: the local store (state.Store), or across
// instances the shared checkpoint store, whose keys name units where the local store's
// name splits (the stage's split, as a unit: "<stage>/<split>").
type ViewReader interface {
	Get(key []byte) (value []byte, ok bool, err error)
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// ReadView calls fn with every committed row of the materialized view written by job
// (the stages of its plan: at most stages), as many times as the view holds it.
func ReadView(store ViewReader, job string, stages int, fn func(sql.Row) error) error {
	for st := 0; st < stages; st++ {
		prefix := state.OperatorPrefix(nil, job, ViewOperator(st))
		err := store.Scan(prefix, func(k, v []byte) error { return decodeViewEntry(k, v, fn) })
		if err != nil {
			return &StateError{Op: "view", Split: job, Err: err}
		}
	}
	return nil
}

// decodeViewEntry calls fn with the rows one stored view entry (key k, value v) holds.
func decodeViewEntry(k, v []byte, fn func(sql.Row) error) error {
	if len(v) == 0 {
		return errBadViewRow
	}
	switch v[0] {
	case viewRow:
		row, n, err := sql.DecodeRow(v[1:], nil)
		if err != nil || 1+n != len(v) {
			return fmt.Errorf("%w: %v", errBadViewRow, err)
		}
		return fn(row)
	case viewCount:
		c, err := viewCountOf(v)
		if err != nil {
			return err
		}
		if c > maxViewCount {
			return fmt.Errorf("%w: a row counted %d times", errBadViewRow, c)
		}
		_, _, _, rest, ok := state.KeyParts(k)
		if !ok {
			return errBadViewRow
		}
		row, n, err := sql.DecodeRow(rest, nil)
		if err != nil || n != len(rest) {
			return fmt.Errorf("%w: %v", errBadViewRow, err)
		}
		for i := 0; i < c; i++ {
			if err := fn(row); err != nil {
				return err
			}
		}
		return nil
	}
	return errBadViewRow
}

// ViewKey appends the store encoding of a keyed view's key (the values of its key columns,
// in the order of SinkSpec.KeyColumns) to dst: what LookupView takes.
func ViewKey(dst []byte, key sql.Row) []byte {
	for _, v := range key {
		dst = sql.AppendValue(dst, v)
	}
	return dst
}

// LookupView calls fn with the committed row of each key of keys (ViewKey encodings) that
// the keyed view written by stage stage of job holds, reading only those keys: a key's row
// is in the split of the stage that processed it, so each key is looked up in every split
// of the stage. The splits are those with a position (SplitKey): a checkpoint writes each
// split's position in the same batch as its view rows, so every split holding rows has one.
// Rows come in the order of keys, then of the splits' names.
func LookupView(store ViewReader, job string, stage int, keys [][]byte, fn func(sql.Row) error) error {
	var splits []string
	err := store.Scan(state.OperatorPrefix(nil, job, "src"+strconv.Itoa(stage)), func(k, _ []byte) error {
		_, _, split, _, ok := state.KeyParts(k)
		if !ok {
			return fmt.Errorf("%w: a position key of stage %d", errBadViewRow, stage)
		}
		splits = append(splits, string(split))
		return nil
	})
	if err != nil {
		return &StateError{Op: "view", Split: job, Err: err}
	}
	prefixes := make([][]byte, len(splits))
	for i, s := range splits {
		prefixes[i] = state.SplitPrefix(nil, job, ViewOperator(stage), s)
	}
	var k []byte
	for _, key := range keys {
		for i, p := range prefixes {
			k = append(append(k[:0], p...), key...)
			v, ok, err := store.Get(k)
			if err != nil {
				return &StateError{Op: "view", Split: splits[i], Err: err}
			}
			if !ok {
				continue
			}
			if err := decodeViewEntry(k, v, fn); err != nil {
				return err
			}
		}
	}
	return nil
}
