package exec

import (
	"math"

	"rsql/sql"
)

// The exact regular join (a regular join without a state TTL, docs/sql.md "Joins"): its
// output, folded as a changelog, is PostgreSQL's answer over the rows its inputs hold at
// that point. Each side's rows of a join key are a multiset (a row kept once per insert,
// removed once per delete), in memory, written to the store at checkpoints like every
// regular join's (the changed keys, in chunks) and loaded at NewSplit. An outer side's row
// keeps its number of matches as its time (jrow.ts): it is emitted with NULLs while the
// number is 0. The numbers are not what a checkpoint keeps (a match arriving does not
// make a checkpoint rewrite the other side's rows of its key): a split's are counted
// again when it is loaded (recount).
//
// A row of a side arriving (an insert):
//   - emits its join with each matching row of the other side; an outer other row that
//     had no match has its NULL-padded row retracted first;
//   - an outer row without a match is emitted with NULLs.
//
// A delete (a retract input's row whose change column is a delete) removes one equal row
// and emits the deletes of what its insert emitted: its joins, and its NULL-padded row when
// it had no match; an outer other row whose last match it was is emitted with NULLs again.
// A table's row (LeftTable, RightTable) first deletes its key's current version, then,
// unless it is a delete, inserts itself; a version older than the current one (by the
// table's version time) is ignored, as the table's latest versions are those with the
// greatest version time.
//
// An inner join of two append-only inputs emits inserts only, without a change column.

// exactRow applies row r of input in (of join key key) to an exact regular join.
func (j *joinOp) exactRow(sp *joinSplit, in int, key string, r sql.Row) {
	n := j.node
	w, changes, table, op, vt := n.LeftWidth, n.LeftChanges, n.LeftTable, n.LeftOp, n.LeftTime
	if in == 1 {
		w, changes, table, op, vt = n.RightWidth, n.RightChanges, n.RightTable, n.RightOp, n.RightTime
	}
	if table {
		del := op >= 0 && sql.IsDelete(r[op])
		if k := sp.keys[in][key]; k != nil {
			var old *jrow // the key's current version or delete (a key has one at most)
			for _, v := range k.rows {
				if !v.dead {
					old = v
					break
				}
			}
			if old != nil {
				if vt >= 0 && versionTime(r[vt]) < versionTime(old.row[vt]) {
					// Older than the key's current version or delete: not its latest
					// (among versions of one time, the one read last is).
					return
				}
				if old.deleted {
					j.remove(sp, old)
				} else {
					j.exactDelete(sp, in, old)
				}
			}
		}
		switch {
		case !del:
			j.exactInsert(sp, in, key, r[:w])
		case vt >= 0:
			// The delete stays as the key's row, joining nothing, so that a version older
			// than it arriving later is ignored too (as the Top-N of a table's versions
			// keeps a deleted key's time).
			k := j.getKey(sp, in, key)
			jr := j.newRow(r[:w], 0, k)
			jr.deleted = true
			k.rows = append(k.rows, jr)
			j.markDirty(sp, k)
		}
		return
	}
	if changes && sql.IsDelete(r[w]) {
		k := sp.keys[in][key]
		if k == nil {
			return // a delete of a row never inserted (or inserted before the job began)
		}
		if e := j.findRow(k, r[:w]); e != nil {
			j.exactDelete(sp, in, e)
		}
		return
	}
	j.exactInsert(sp, in, key, r[:w])
}

// versionTime orders a table's versions by their version time v: a NULL time after every
// time, as the latest versions of a pull query (ORDER BY time DESC) and the Top-N of a
// table's versions order them.
func versionTime(v sql.Value) int64 {
	if v.IsNull() {
		return math.MaxInt64
	}
	return v.I
}

// indexFrom is how many rows a key of a side whose rows are deleted has before its rows
// are indexed by value: below it a delete looks for its row in the list.
const indexFrom = 16

// findRow takes a live row equal to row out of k's index (if any) and returns it, or nil.
func (j *joinOp) findRow(k *jkey, row sql.Row) *jrow {
	if k.idx == nil && len(k.rows)-k.dead < indexFrom {
		for _, e := range k.rows {
			if !e.dead && sql.EqualRows(e.row, row) {
				return e
			}
		}
		return nil
	}
	if k.idx == nil {
		k.idx = make(map[string][]*jrow, len(k.rows))
		for _, e := range k.rows {
			if !e.dead {
				rk := j.encodeRow(e.row)
				k.idx[rk] = append(k.idx[rk], e)
			}
		}
	}
	rk := j.encodeRow(row)
	list := k.idx[rk]
	for len(list) > 0 {
		e := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if !e.dead {
			if len(list) == 0 {
				delete(k.idx, rk)
			} else {
				k.idx[rk] = list
			}
			return e
		}
	}
	delete(k.idx, rk)
	return nil
}

// encodeRow is row's values as a map key (equal values, equal keys).
func (j *joinOp) encodeRow(row sql.Row) string {
	j.rowKey = j.rowKey[:0]
	for _, v := range row {
		j.rowKey = sql.AppendKey(j.rowKey, v)
	}
	return string(j.rowKey)
}

// exactInsert joins row (of side in, its columns only) with the other side's rows of key
// and keeps it.
func (j *joinOp) exactInsert(sp *joinSplit, in int, key string, row sql.Row) {
	outerIn, outerOther := j.outerSide(in), j.outerSide(1-in)
	var matches int64
	if other := sp.keys[1-in][key]; other != nil {
		for _, o := range other.rows {
			if o.dead || o.deleted {
				continue
			}
			l, r := row, o.row
			if in == 1 {
				l, r = o.row, row
			}
			if !j.joinedPasses(l, r) {
				continue
			}
			matches++
			if outerOther {
				if o.ts == 0 {
					j.putAlone(1-in, o.row, true)
				}
				o.ts++
			}
			j.putJoined(false)
		}
	}
	if outerIn && matches == 0 {
		j.putAlone(in, row, false)
	}
	k := j.getKey(sp, in, key)
	jr := j.newRow(row, 0, k)
	if outerIn {
		jr.ts = matches
	}
	k.rows = append(k.rows, jr)
	if k.idx != nil {
		rk := j.encodeRow(row)
		k.idx[rk] = append(k.idx[rk], jr)
	}
	j.markDirty(sp, k)
}

// exactDelete takes kept row e of side in back: the deletes of its joins (or of its
// NULL-padded row), and the NULL-padded rows of the other side's rows it was the last
// match of.
func (j *joinOp) exactDelete(sp *joinSplit, in int, e *jrow) {
	outerIn, outerOther := j.outerSide(in), j.outerSide(1-in)
	if other := sp.keys[1-in][e.k.key]; other != nil {
		for _, o := range other.rows {
			if o.dead || o.deleted {
				continue
			}
			l, r := e.row, o.row
			if in == 1 {
				l, r = o.row, e.row
			}
			if !j.joinedPasses(l, r) {
				continue
			}
			j.putJoined(true)
			if outerOther {
				o.ts--
				if o.ts == 0 {
					j.putAlone(1-in, o.row, false)
				}
			}
		}
	}
	if outerIn && e.ts == 0 {
		j.putAlone(in, e.row, true)
	}
	j.remove(sp, e)
	if len(e.k.rows) == 0 {
		e.k.idx = nil
	}
}

// exactAlone handles a row whose join key is NULL: it matches nothing, so an outer side's
// row (or its delete) goes out with NULLs; it is not kept.
func (j *joinOp) exactAlone(in int, r sql.Row) {
	if !j.outerSide(in) {
		return
	}
	n := j.node
	w, changes := n.LeftWidth, n.LeftChanges
	if in == 1 {
		w, changes = n.RightWidth, n.RightChanges
	}
	j.putAlone(in, r[:w], changes && sql.IsDelete(r[w]))
}

// joinedPasses builds the joined row of l and r (each side's columns) in j.joined and
// reports whether the residual condition holds for it.
func (j *joinOp) joinedPasses(l, r sql.Row) bool {
	j.joined = append(append(j.joined[:0], l...), r...)
	return j.node.Residual == nil || j.node.Residual(j.joined).Truth()
}

// putJoined appends j.joined to the output, with its change (a delete or an insert) when
// the join's rows change.
func (j *joinOp) putJoined(del bool) {
	j.out.vals = append(j.out.vals, j.joined...)
	j.putOp(del)
}

// putAlone appends side's row with NULLs for the other side.
func (j *joinOp) putAlone(side int, row sql.Row, del bool) {
	if side == 0 {
		j.out.vals = append(append(j.out.vals, row...), j.nulls[1]...)
	} else {
		j.out.vals = append(append(j.out.vals, j.nulls[0]...), row...)
	}
	j.putOp(del)
}

func (j *joinOp) putOp(del bool) {
	if j.changes {
		if del {
			j.out.vals = append(j.out.vals, sql.OpDelete)
		} else {
			j.out.vals = append(j.out.vals, sql.Null)
		}
	}
	j.out.endRow()
}

// recount sets the match count of every row of an outer side of split sp (after a load).
func (j *joinOp) recount(sp *joinSplit) {
	for side := 0; side < 2; side++ {
		if !j.outerSide(side) {
			continue
		}
		for key := range sp.keys[side] {
			j.recountSide(sp, side, key)
		}
	}
}

// recountKey sets the match count of the rows of an outer side of key (read back from the
// store, join_cache.go).
func (j *joinOp) recountKey(sp *joinSplit, key string) {
	for side := 0; side < 2; side++ {
		if j.outerSide(side) {
			j.recountSide(sp, side, key)
		}
	}
}

func (j *joinOp) recountSide(sp *joinSplit, side int, key string) {
	k, other := sp.keys[side][key], sp.keys[1-side][key]
	if k == nil {
		return
	}
	for _, r := range k.rows {
		r.ts = 0
		if other == nil {
			continue
		}
		for _, o := range other.rows {
			l, rr := r.row, o.row
			if side == 1 {
				l, rr = o.row, r.row
			}
			if !o.dead && !o.deleted && j.joinedPasses(l, rr) {
				r.ts++
			}
		}
	}
}
