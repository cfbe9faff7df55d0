package exec

import (
	"sort"

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

// ownRow copies a row so that it outlives its batch.
func ownRow(r sql.Row) sql.Row {
	out := make(sql.Row, len(r))
	for i, v := range r {
		out[i] = ownValue(v)
	}
	return out
}

// sortOp holds every row of its (bounded, one-split) input and emits them in order when the
// input ends.
type sortOp struct {
	stateless
	keys  []planner.SortSpec
	rows  []sql.Row
	split string
	out   Batch
}

func (s *sortOp) Process(_ int, b *Batch, _ Emitter) error {
	for _, r := range b.Rows {
		s.rows = append(s.rows, ownRow(r))
	}
	s.split = b.Split
	return nil
}

func (s *sortOp) Watermark(split string, wm int64, out Emitter) error {
	if wm != MaxWatermark || s.rows == nil {
		return nil
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
