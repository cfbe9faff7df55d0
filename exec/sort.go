package exec

import (
	"sort"
	"unsafe"

	"rsql/planner"
	"rsql/sql"
)

// compareKeys orders two rows by keys as PostgreSQL's ORDER BY: NULL comes first or last
// as the key says (by default it is larger than every value: last ascending, first
// descending).
func compareKeys(keys []planner.SortSpec, a, b sql.Row) int {
	for _, k := range keys {
		va, vb := k.Eval(a), k.Eval(b)
		an, bn := va.IsNull(), vb.IsNull()
		if an || bn {
			if an && bn {
				continue
			}
			if an == k.NullsFirst {
				return -1
			}
			return 1
		}
		c := sql.Compare(va, vb)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// ownRow copies a row so that it outlives its batch. The row's strings are copied into
// one allocation that they share (a kept row costs two allocations, not one per string).
func ownRow(r sql.Row) sql.Row {
	out := make(sql.Row, len(r))
	n, strs := 0, 0
	for _, v := range r {
		if v.S != "" {
			n += len(v.S)
			strs++
		}
	}
	if strs <= 1 {
		for i, v := range r {
			out[i] = ownValue(v)
		}
		return out
	}
	buf := make([]byte, 0, n)
	for _, v := range r {
		buf = append(buf, v.S...)
	}
	all := unsafe.String(&buf[0], len(buf))
	at := 0
	for i, v := range r {
		if v.S != "" {
			v.S = all[at : at+len(v.S)]
			at += len(v.S)
		}
		out[i] = v
	}
	return out
}

// sortOp holds every row of its (bounded, one-split) input and emits them in order when the
// input ends. Over an updating input (changes) it applies the changes as they come and
// emits the final rows, without the change column: a retract input's row adds one copy of
// itself, its delete takes one equal copy away; an upsert input's row replaces its key's,
// its delete removes it. Rows keep the order in which they (or their key) first came, so
// the stable sort leaves equal rows in arrival order.
type sortOp struct {
	stateless
	keys  []planner.SortSpec
	rows  []sql.Row
	split string
	out   Batch

	changes planner.ChangeMode
	key     []int
	slot    map[string]int // a row's (retract) or key's (upsert) index in rows
	count   []int          // retract: the copies of rows[i]; upsert: 1 while the key has a row
	enc     []byte
}

func (s *sortOp) Process(_ int, b *Batch, _ Emitter) error {
	s.split = b.Split
	if s.changes == planner.AppendOnly {
		for _, r := range b.Rows {
			s.rows = append(s.rows, ownRow(r))
		}
		return nil
	}
	if s.slot == nil {
		s.slot = map[string]int{}
	}
	for _, r := range b.Rows {
		w := len(r) - 1
		del := sql.IsDelete(r[w])
		s.enc = s.enc[:0]
		if s.changes == planner.Upsert {
			for _, k := range s.key {
				s.enc = sql.AppendKey(s.enc, r[k])
			}
		} else {
			for _, v := range r[:w] {
				s.enc = sql.AppendKey(s.enc, v)
			}
		}
		i, ok := s.slot[string(s.enc)]
		switch {
		case !ok && del:
			// A delete of a row the input never inserted: nothing to take back.
		case !ok:
			s.slot[string(s.enc)] = len(s.rows)
			s.rows = append(s.rows, ownRow(r[:w]))
			s.count = append(s.count, 1)
		case s.changes == planner.Upsert && del:
			s.count[i] = 0
		case s.changes == planner.Upsert:
			s.rows[i], s.count[i] = ownRow(r[:w]), 1
		case del:
			s.count[i] = max(s.count[i]-1, 0)
		default:
			s.count[i]++
		}
	}
	return nil
}

// final makes rows the final rows of an updating input: each row as many times as its
// count.
func (s *sortOp) final() {
	var out []sql.Row
	for i, r := range s.rows {
		for range s.count[i] {
			out = append(out, r)
		}
	}
	if out == nil {
		out = []sql.Row{} // (non-nil: the input ended)
	}
	s.rows, s.count, s.slot = out, nil, nil
}

func (s *sortOp) Watermark(split string, wm int64, out Emitter) error {
	if wm != MaxWatermark || s.rows == nil {
		return nil
	}
	if s.changes != planner.AppendOnly {
		s.final()
	}
	sort.SliceStable(s.rows, func(i, j int) bool { return compareKeys(s.keys, s.rows[i], s.rows[j]) < 0 })
	rows := s.rows
	s.rows = nil
	for len(rows) > 0 {
		n := min(len(rows), 1024)
		s.out.Split, s.out.Rows, s.out.Offsets = split, rows[:n], nil
		if err := out.Emit(&s.out); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}
