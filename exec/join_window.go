package exec

import (
	"encoding/binary"
	"fmt"
	"slices"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Window joins (planner.JoinWindow) keep each side's rows per window, not per join key:
// a window's rows of one side are a log (wlog) of encoded rows in their stored form (a
// flags byte, 0; the varint window end; sql.AppendRow), appended as they come — no map
// lookup, no boxed values and no object per row for the garbage collector. When the
// window closes, the side with fewer rows is decoded and indexed by join key, and the
// other side's rows are read one at a time and looked up in it.
//
// State: a checkpoint writes each log's rows appended since the last one as a new chunk,
// under (2 + side, window end, chunk number). A log's rows of chunks that a committed
// checkpoint holds leave memory (spilled): they are read back from the store when the
// window closes. Rows leave at the checkpoint after the one that wrote them, when that
// one has committed (a stage waits for its last commit before its next barrier, doc.go).
//
// A dominated side (planner.JoinDominance) appends only rows at or past their group's
// running extreme: the others cannot equal the aggregate side's value.

// wlog is one side's rows of one window (by its end) in a split.
type wlog struct {
	side     int
	end      int64
	enc      []byte // rows in memory
	n        int    // rows in enc
	encSaved int    // enc[:encSaved], nSaved rows, is in stored chunks not yet spilled
	nSaved   int
	chunks   int64 // chunks stored
	spilled  int64 // chunks 0..spilled-1 are in the store only
	spilledN int   // the rows of those chunks
	dirty    bool  // rows appended since the last checkpoint
}

// windowState is a split's window join state.
type windowState struct {
	logs  [2]map[int64]*wlog
	dirty []*wlog // logs with rows appended since the last checkpoint
	saved []*wlog // logs that wrote a chunk at the last checkpoint: they spill at the next
	dels  [][]byte
	// best is the dominated side's running extreme per window end and group.
	best map[int64]map[string]sql.Value
}

func (sp *joinSplit) window() *windowState {
	if sp.win == nil {
		sp.win = &windowState{logs: [2]map[int64]*wlog{{}, {}}}
	}
	return sp.win
}

// keysNull reports whether a join key of side's row r is NULL (it matches nothing).
func (j *joinOp) keysNull(side int, r sql.Row) bool {
	keys := j.node.LeftKeys
	if side == 1 {
		keys = j.node.RightKeys
	}
	for _, k := range keys {
		if k(r).IsNull() {
			return true
		}
	}
	return false
}

// windowRow adds row r of input in to its window's log; it reports false when the row is
// late (its window closed, or no window).
func (j *joinOp) windowRow(sp *joinSplit, in int, r sql.Row) bool {
	n := j.node
	endCol := n.LeftEnd
	if in == 1 {
		endCol = n.RightEnd
	}
	end := r[endCol]
	if end.IsNull() || end.I <= sp.lateBound(in) {
		return false
	}
	ws := sp.window()
	if d := n.Dominance; d != nil && d.Side == in && !j.admit(ws, end.I, r) {
		return true // below its group's running extreme: it cannot match
	}
	j.appendRow(ws, in, end.I, r)
	return true
}

func (j *joinOp) appendRow(ws *windowState, side int, end int64, r sql.Row) {
	lg := ws.logs[side][end]
	if lg == nil {
		lg = &wlog{side: side, end: end}
		ws.logs[side][end] = lg
	}
	lg.enc = append(lg.enc, 0)
	lg.enc = binary.AppendVarint(lg.enc, end)
	lg.enc = sql.AppendRow(lg.enc, r)
	lg.n++
	j.kept.Add(1)
	if !lg.dirty {
		lg.dirty = true
		ws.dirty = append(ws.dirty, lg)
	}
}

// admit decides whether a row of a window join's dominated side (planner.JoinDominance)
// is kept: not when its value is past its group's running extreme (below a maximum, above
// a minimum) — the aggregate side's value for the group is at least that extreme, so the
// row cannot equal it. A row at or beyond the extreme is kept, and moves it. Rows kept
// before the extreme moved stay in the log and no longer match: in random order a group's
// extreme moves about ln(rows) times, so they are few; values that only rise (fall, for a
// minimum) through a window keep every row, as a join without dominance does.
func (j *joinOp) admit(ws *windowState, end int64, r sql.Row) bool {
	d := j.node.Dominance
	keys := j.node.LeftKeys
	if d.Side == 1 {
		keys = j.node.RightKeys
	}
	j.grpBuf = j.grpBuf[:0]
	for i, k := range keys {
		if i != d.Key {
			j.grpBuf = sql.AppendKey(j.grpBuf, k(r))
		}
	}
	v := dominated(d, keys, d.HeldCol, r)
	if v.IsNull() {
		return d.Key >= 0 // a NULL key is filtered before; NULL >= the MAX is never true
	}
	if ws.best == nil {
		ws.best = map[int64]map[string]sql.Value{}
	}
	groups := ws.best[end]
	if groups == nil {
		groups = map[string]sql.Value{}
		ws.best[end] = groups
	}
	b, ok := groups[string(j.grpBuf)]
	if !ok || sql.Compare(v, b)*d.Sign > 0 {
		groups[string(j.grpBuf)] = ownValue(v)
		return true
	}
	return sql.Compare(v, b) == 0
}

// dominated is the value a dominance compares of row r of a side: its join key d.Key, or
// column col when the residual condition compares the two sides (d.Key < 0).
func dominated(d *planner.JoinDominance, keys []planner.Evaluator, col int, r sql.Row) sql.Value {
	if d.Key >= 0 {
		return keys[d.Key](r)
	}
	return r[col]
}

// checkDominance, for a row r of side at the close of the window ending at end, reports a
// dominance miss when r is the aggregate's row and its value is behind the running extreme
// of the rows that reached the join (below it, for a maximum): a row late for the aggregate
// but on time here raised the extreme, so rows at the aggregate's value were dropped on
// arrival and the window's result lacks them (docs/sql.md "Joins"). It is logged, never
// silent.
func (j *joinOp) checkDominance(ws *windowState, end int64, side int, r sql.Row) {
	d := j.node.Dominance
	if d == nil || side == d.Side || ws.best == nil || j.logf == nil {
		return
	}
	keys := j.node.LeftKeys
	if side == 1 {
		keys = j.node.RightKeys
	}
	j.grpBuf = j.grpBuf[:0]
	for i, k := range keys {
		if i != d.Key {
			j.grpBuf = sql.AppendKey(j.grpBuf, k(r))
		}
	}
	b, ok := ws.best[end][string(j.grpBuf)]
	if v := dominated(d, keys, d.AggCol, r); ok && !v.IsNull() && sql.Compare(v, b)*d.Sign < 0 {
		j.logf("job %s: window join %s: the window ending at %s has aggregate value %s behind %s, the extreme of the rows that reached the join (a row late for the aggregate was on time here); rows at %s were dropped and are missing from its result",
			j.job, j.id, sql.Value{K: sql.KindTimestamp, I: end}.String(), v.String(), b.String(), v.String())
	}
}

// closeWindows closes the windows whose end the watermark wm has reached, oldest first.
func (j *joinOp) closeWindows(sp *joinSplit, wm int64, split string, out Emitter) error {
	ws := sp.win
	if ws == nil {
		return nil
	}
	var ends []int64
	for side := range ws.logs {
		for end := range ws.logs[side] {
			if end <= wm && !slices.Contains(ends, end) {
				ends = append(ends, end)
			}
		}
	}
	slices.Sort(ends)
	for _, end := range ends {
		if err := j.closeWindow(sp, end, split, out); err != nil {
			return err
		}
	}
	return nil
}

// closeWindow emits the matches of the window ending at end, the unmatched rows of outer
// sides with NULLs, and forgets the window. The side with fewer rows is decoded and
// indexed by join key; the other side's rows are read one at a time (from the store where
// spilled) and looked up, so a window's larger side is never decoded whole.
func (j *joinOp) closeWindow(sp *joinSplit, end int64, split string, out Emitter) error {
	n := j.node
	ws := sp.win
	logs := [2]*wlog{ws.logs[0][end], ws.logs[1][end]}
	size := func(g *wlog) int {
		if g == nil {
			return 0
		}
		return g.n + g.spilledN
	}
	bside := 1
	if size(logs[0]) < size(logs[1]) {
		bside = 0
	}
	pside := 1 - bside
	outer := [2]bool{n.Kind == sql.JoinLeft || n.Kind == sql.JoinFull, n.Kind == sql.JoinRight || n.Kind == sql.JoinFull}
	width := [2]int{n.LeftWidth, n.RightWidth}

	// The build side, decoded and indexed.
	j.dec, j.decEnds = j.dec[:0], j.decEnds[:0]
	err := j.logRows(sp, logs[bside], width[bside], func(row sql.Row) error {
		j.dec = append(j.dec, row...)
		j.decEnds = append(j.decEnds, len(j.dec))
		return nil
	})
	if err != nil {
		return err
	}
	j.decRows = j.decRows[:0]
	from := 0
	for _, e := range j.decEnds {
		j.decRows = append(j.decRows, j.dec[from:e:e])
		from = e
	}
	build := j.decRows
	j.matched = append(j.matched[:0], make([]bool, len(build))...)
	bm := j.matched
	if j.index == nil {
		j.index = map[string][]int32{}
	}
	for i, r := range build {
		j.checkDominance(ws, end, bside, r)
		j.appendKey(bside, r) // rows with a NULL key were not kept
		j.index[string(j.keyBuf)] = append(j.index[string(j.keyBuf)], int32(i))
	}

	// The probe side, row by row.
	if len(build) > 0 || outer[pside] {
		err = j.logRows(sp, logs[pside], width[pside], func(p sql.Row) error {
			j.checkDominance(ws, end, pside, p)
			matched := false
			if len(build) > 0 {
				j.appendKey(pside, p)
				for _, bi := range j.index[string(j.keyBuf)] {
					l, r := p, build[bi]
					if bside == 0 {
						l, r = build[bi], p
					}
					if j.emit(l, r, false) {
						matched, bm[bi] = true, true
					}
				}
			}
			if !matched && outer[pside] {
				if pside == 0 {
					j.emit(p, nil, true)
				} else {
					j.emit(nil, p, true)
				}
			}
			if j.out.len() >= 1024 {
				return j.out.flush(split, out)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if outer[bside] {
		for bi, b := range build {
			if !bm[bi] {
				if bside == 0 {
					j.emit(b, nil, true)
				} else {
					j.emit(nil, b, true)
				}
			}
		}
	}
	clear(j.index)
	clear(j.decRows)
	clear(j.dec)
	for _, g := range logs {
		if g != nil {
			j.dropLog(sp, g)
		}
	}
	delete(ws.best, end)
	return j.out.flush(split, out)
}

// dropLog forgets a window's log of one side, in memory and (at the next checkpoint) in
// the store.
func (j *joinOp) dropLog(sp *joinSplit, g *wlog) {
	ws := sp.win
	j.kept.Add(-int64(g.n + g.spilledN))
	for c := range g.chunks {
		ws.dels = append(ws.dels, j.logKey(sp, g.side, g.end, c))
	}
	if ws.logs[g.side][g.end] == g {
		delete(ws.logs[g.side], g.end)
	}
	*g = wlog{side: g.side, end: g.end}
}

// logKey is the store key of chunk c of side's log of the window ending at end.
func (j *joinOp) logKey(sp *joinSplit, side int, end, c int64) []byte {
	return state.Key(nil, j.job, j.id, sp.name, []byte{byte(2 + side)}, end, c)
}

// logRows calls each with every row of a log (nil: none; the row is valid during the
// call): the spilled chunks' rows from the store, then those in memory. An error of each
// stops it.
func (j *joinOp) logRows(sp *joinSplit, g *wlog, width int, each func(sql.Row) error) error {
	if g == nil {
		return nil
	}
	var eachErr error
	call := func(_ byte, _ int64, row sql.Row) {
		if eachErr == nil {
			eachErr = each(row)
		}
	}
	for c := int64(0); c < g.spilled && eachErr == nil; c++ {
		v, ok, err := j.store.Get(j.logKey(sp, g.side, g.end, c))
		if err == nil && !ok {
			err = fmt.Errorf("%w: chunk %d of a window's rows is missing", errBadJoin, c)
		}
		if err == nil {
			err = decodeJoinRows(v, width, call)
		}
		if err != nil {
			return &StateError{Op: j.id, Split: sp.name, Err: err}
		}
	}
	if eachErr != nil {
		return eachErr
	}
	if err := decodeJoinBody(g.enc, uint64(g.n), width, call); err != nil {
		return &StateError{Op: j.id, Split: sp.name, Err: err}
	}
	return eachErr
}

// rows is the number of rows a split's window join holds.
func (ws *windowState) rows() int64 {
	if ws == nil {
		return 0
	}
	var n int64
	for side := range ws.logs {
		for _, g := range ws.logs[side] {
			n += int64(g.n + g.spilledN)
		}
	}
	return n
}

// saveWindows writes a split's window join state into b: first the logs the last
// checkpoint wrote spill (that checkpoint has committed), then each log's appended rows
// go out as a new chunk, straight from their encoded form.
func (j *joinOp) saveWindows(sp *joinSplit, b *state.Batch) {
	ws := sp.win
	if ws == nil {
		return
	}
	for _, g := range ws.saved {
		if ws.logs[g.side][g.end] != g || g.nSaved == 0 {
			continue // closed since
		}
		g.spilled, g.spilledN = g.chunks, g.spilledN+g.nSaved
		g.enc = append([]byte(nil), g.enc[g.encSaved:]...)
		g.n -= g.nSaved
		g.encSaved, g.nSaved = 0, 0
	}
	clear(ws.saved)
	ws.saved = ws.saved[:0]
	for _, k := range ws.dels {
		b.Delete(k)
	}
	clear(ws.dels)
	ws.dels = ws.dels[:0]
	for _, g := range ws.dirty {
		if !g.dirty {
			continue
		}
		g.dirty = false
		if ws.logs[g.side][g.end] != g || g.n == g.nSaved {
			continue
		}
		var hdr [binary.MaxVarintLen64]byte
		h := binary.PutUvarint(hdr[:], uint64(g.n-g.nSaved))
		body := g.enc[g.encSaved:]
		v := b.PutValue(j.logKey(sp, g.side, g.end, g.chunks), h+len(body))
		copy(v[copy(v, hdr[:h]):], body)
		g.chunks++
		g.encSaved, g.nSaved = len(g.enc), g.n
		if j.store != nil {
			ws.saved = append(ws.saved, g)
		}
	}
	clear(ws.dirty)
	ws.dirty = ws.dirty[:0]
}

// loadWindowEntry restores one stored entry of a window join: a chunk of a window's log
// (kb: 2 + side; its rows stay in the store), or a key's rows in the per-key form of
// earlier versions (kb: side, key), appended to their windows' logs and deleted from the
// store at the next checkpoint. The dominated side's running extremes are rebuilt from
// the rows.
func (j *joinOp) loadWindowEntry(sp *joinSplit, key, kb []byte, start, c int64, v []byte) error {
	ws := sp.window()
	side := int(kb[0])
	logForm := side >= 2
	if logForm {
		side -= 2
	}
	if side > 1 || logForm && len(kb) != 1 {
		return errBadJoin
	}
	width := j.node.LeftWidth
	if side == 1 {
		width = j.node.RightWidth
	}
	d := j.node.Dominance
	held := d != nil && d.Side == side
	if !logForm {
		err := decodeJoinRows(v, width, func(_ byte, end int64, row sql.Row) {
			if held {
				j.admit(ws, end, row)
			}
			j.appendRow(ws, side, end, row)
		})
		if err != nil {
			return err
		}
		ws.dels = append(ws.dels, slices.Clone(key))
		return nil
	}
	g := ws.logs[side][start]
	if g == nil {
		g = &wlog{side: side, end: start}
		ws.logs[side][start] = g
	}
	if c != g.chunks {
		return fmt.Errorf("%w: chunk %d of a window's rows, want %d", errBadJoin, c, g.chunks)
	}
	cnt := 0
	err := decodeJoinRows(v, width, func(_ byte, _ int64, row sql.Row) {
		if held {
			j.admit(ws, start, row)
		}
		cnt++
	})
	if err != nil {
		return err
	}
	g.chunks++
	g.spilled, g.spilledN = g.chunks, g.spilledN+cnt
	j.kept.Add(int64(cnt))
	return nil
}
