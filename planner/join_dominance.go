package planner

import (
	"strings"

	"rsql/sql"
)

// JoinDominance marks a window join one side of which (the aggregate side) is a windowed
// MAX or MIN of the other side's rows (the held side), grouped by columns the join equates
// with the held side's, and joined on the held column equal to the aggregate, or at or past
// it (held >= MAX, held <= MIN, in the residual condition): a held row can only match when
// its value is the extreme of its group, so the join keeps, per group of a window, only the
// rows at the running extreme and drops the others as they are passed (docs/sql.md,
// "Joins"). The held side's rows may be a stream's or a windowed aggregation's (Nexmark
// q5: the bids per auction, joined with the largest of the same counts per window). Found
// by the planner (dominanceOf), never asked for.
type JoinDominance struct {
	// Side is the held side (0 left, 1 right) whose rows may be dropped.
	Side int
	// Key is the index in the join keys of the held column = the aggregate's value, or -1
	// when the residual condition compares them: then HeldCol and AggCol are the held
	// column and the aggregate, each an index into its side's row. The keys other than Key
	// (the window and the group) name the group.
	Key             int
	HeldCol, AggCol int
	// Sign is 1 for MAX (rows below the running maximum are dropped), -1 for MIN.
	Sign int
}

// Column lineage: what a column of a plan node is in terms of the stream it was read from.
const (
	lineUnknown = -1 // computed, or not traced
	lineStart   = -2 // window_start of the side's window
	lineEnd     = -3 // window_end
)

// lineage describes the rows of a chain of Scan, Filter, Project (of columns) and
// WindowAssign nodes: the stream they come from, each output column's stream column
// (or lineStart, lineEnd, lineUnknown), the window assigned (TimeCol a stream column)
// and whether any rows were filtered out.
//
// The chain may also start at a windowed aggregation over such a chain (agg, its input's
// lineage aggIn): its rows are then the aggregation's, cols index the aggregation's row
// (its keys, window bounds as lineStart and lineEnd, aggregates), and win is its window.
type lineage struct {
	rel      *sql.Relation
	cols     []int
	win      *sql.Window
	filtered bool
	agg      *Aggregate
	aggIn    *lineage
}

// traceLineage follows l down to its Scan; ok is false when l is anything else than the
// chain lineage describes.
func traceLineage(l LogicalNode) (lineage, bool) {
	switch n := l.(type) {
	case *Scan:
		if n.Snapshot || n.Relation == nil || n.Relation.IsTable {
			return lineage{}, false
		}
		return lineage{rel: n.Relation, cols: append([]int(nil), n.Columns...)}, true
	case *Filter:
		in, ok := traceLineage(n.Input)
		in.filtered = true
		return in, ok
	case *Project:
		in, ok := traceLineage(n.Input)
		if !ok {
			return in, false
		}
		cols := make([]int, len(n.Exprs))
		for i, e := range n.Exprs {
			cols[i] = lineUnknown
			if c, isCol := e.(*sql.ColumnRef); isCol && c.Index >= 0 && c.Index < len(in.cols) {
				cols[i] = in.cols[c.Index]
			}
		}
		in.cols = cols
		return in, true
	case *WindowAssign:
		in, ok := traceLineage(n.Input)
		if !ok || in.win != nil || n.Window.TimeCol < 0 || n.Window.TimeCol >= len(in.cols) || in.cols[n.Window.TimeCol] < 0 {
			return in, false
		}
		w := n.Window
		w.TimeCol = in.cols[w.TimeCol]
		in.win = &w
		in.cols = append(in.cols, lineStart, lineEnd)
		return in, true
	case *Aggregate:
		in, ok := traceLineage(n.Input)
		if !ok || in.agg != nil || in.win != nil || in.filtered || n.Window == nil || n.Emit != sql.EmitOnClose ||
			n.Retracting || n.TTL != 0 || n.EmitNew || n.Window.Kind != sql.WindowTumble && n.Window.Kind != sql.WindowHop ||
			n.Window.TimeCol < 0 || n.Window.TimeCol >= len(in.cols) || in.cols[n.Window.TimeCol] < 0 {
			return lineage{}, false
		}
		w := *n.Window
		w.TimeCol = in.cols[w.TimeCol]
		out := lineage{rel: in.rel, win: &w, agg: n, aggIn: &in}
		for i := range n.Keys {
			out.cols = append(out.cols, i)
		}
		out.cols = append(out.cols, lineStart, lineEnd)
		for i := range n.Aggs {
			out.cols = append(out.cols, len(n.Keys)+2+i)
		}
		return out, true
	}
	return lineage{}, false
}

// sameRows reports whether two lineages' bases compute the same rows: one stream, or
// windowed aggregations of the same keys, window and aggregates over one stream's
// unfiltered rows (so their rows and values are equal).
func sameRows(a, b lineage) bool {
	if a.rel != b.rel && (a.rel == nil || b.rel == nil || a.rel.Name != b.rel.Name) {
		return false
	}
	if a.agg == nil || b.agg == nil {
		return a.agg == nil && b.agg == nil
	}
	x, y := a.agg, b.agg
	if len(x.Keys) != len(y.Keys) || len(x.Aggs) != len(y.Aggs) || !sameWindow(*a.win, *b.win) {
		return false
	}
	col := func(in *lineage, e sql.Expr) int {
		if c, ok := e.(*sql.ColumnRef); ok && c.Index >= 0 && c.Index < len(in.cols) {
			return in.cols[c.Index]
		}
		return lineUnknown
	}
	for i := range x.Keys {
		if k := col(a.aggIn, x.Keys[i]); k < 0 || k != col(b.aggIn, y.Keys[i]) {
			return false
		}
	}
	for i := range x.Aggs {
		f, g := x.Aggs[i], y.Aggs[i]
		fd, _ := f.Aggregate()
		gd, _ := g.Aggregate()
		builtin, _ := sql.LookupAgg(strings.ToUpper(f.Func))
		if !strings.EqualFold(f.Func, g.Func) || fd != builtin || gd != builtin || f.Star != g.Star ||
			f.Distinct != g.Distinct || f.T != g.T || (f.Arg == nil) != (g.Arg == nil) {
			return false
		}
		if f.Arg != nil {
			if k := col(a.aggIn, f.Arg); k < 0 || k != col(b.aggIn, g.Arg) {
				return false
			}
		}
	}
	return true
}

// aggColumn is what a column of the aggregate side is: a group key of stream column col,
// the window's start or end, or the extreme (sign) of stream column col.
type aggColumn struct {
	line int // stream column of a key; lineStart, lineEnd; lineUnknown for an aggregate
	ext  int // an aggregate's stream column, with sign; -1 otherwise
	sign int
}

// traceAggregate follows the aggregate side down through Filters (HAVING: they only drop
// aggregate rows) and Projects of columns to a windowed Aggregate whose input is an
// unfiltered chain of one stream; it returns the side's columns, the aggregate's group
// keys' stream columns, and the input's lineage.
func traceAggregate(l LogicalNode) ([]aggColumn, []int, lineage, bool) {
	switch n := l.(type) {
	case *Filter:
		return traceAggregate(n.Input)
	case *Project:
		cols, keys, in, ok := traceAggregate(n.Input)
		if !ok {
			return nil, nil, in, false
		}
		out := make([]aggColumn, len(n.Exprs))
		for i, e := range n.Exprs {
			out[i] = aggColumn{line: lineUnknown, ext: -1}
			if c, isCol := e.(*sql.ColumnRef); isCol && c.Index >= 0 && c.Index < len(cols) {
				out[i] = cols[c.Index]
			}
		}
		return out, keys, in, true
	case *Aggregate:
		if n.Window == nil || n.Emit != sql.EmitOnClose || n.Retracting {
			// Rows emitted on every change would make earlier extremes match too.
			return nil, nil, lineage{}, false
		}
		in, ok := traceLineage(n.Input)
		switch {
		case !ok || in.filtered:
			return nil, nil, in, false
		case in.win == nil:
			// Over a stream: its own window.
			if n.Window.TimeCol < 0 || n.Window.TimeCol >= len(in.cols) || in.cols[n.Window.TimeCol] < 0 {
				return nil, nil, in, false
			}
			w := *n.Window
			w.TimeCol = in.cols[w.TimeCol]
			in.win = &w
		case in.agg != nil && n.Window.Kind == sql.WindowGiven:
			// Over a windowed aggregation's rows, grouped by their window (a chained
			// aggregation): the window is theirs.
			t, e := n.Window.TimeCol, n.Window.EndCol
			if t < 0 || e < 0 || t >= len(in.cols) || e >= len(in.cols) || in.cols[t] != lineStart || in.cols[e] != lineEnd {
				return nil, nil, in, false
			}
		default:
			return nil, nil, in, false
		}
		var cols []aggColumn
		var keys []int
		for _, k := range n.Keys {
			line := lineUnknown
			if c, isCol := k.(*sql.ColumnRef); isCol && c.Index >= 0 && c.Index < len(in.cols) {
				line = in.cols[c.Index]
			}
			if line < 0 {
				return nil, nil, in, false // a group the held side cannot be matched to
			}
			cols = append(cols, aggColumn{line: line, ext: -1})
			keys = append(keys, line)
		}
		cols = append(cols, aggColumn{line: lineStart, ext: -1}, aggColumn{line: lineEnd, ext: -1})
		for _, a := range n.Aggs {
			c := aggColumn{line: lineUnknown, ext: -1}
			def, _ := a.Aggregate()
			name := strings.ToUpper(a.Func)
			builtin, _ := sql.LookupAgg(name)
			if arg, isCol := a.Arg.(*sql.ColumnRef); isCol && def == builtin && (name == "MAX" || name == "MIN") &&
				arg.Index >= 0 && arg.Index < len(in.cols) && in.cols[arg.Index] >= 0 {
				c.ext, c.sign = in.cols[arg.Index], 1
				if name == "MIN" {
					c.sign = -1
				}
			}
			cols = append(cols, c)
		}
		return cols, keys, in, true
	}
	return nil, nil, lineage{}, false
}

// dominanceOf finds whether a window join's held side can drop rows (JoinDominance): an
// inner join, or an outer join whose outer side is the aggregate side (the held side's
// unmatched rows are never emitted); one side a chain over a stream (its rows a subset of
// the stream's: filters allowed) with a window assigned, the other a MAX/MIN aggregate of
// the unfiltered same stream over the same window; every group key of the aggregate, and
// both window bounds, equated with the held side's same columns; and one key equating a
// held column with the aggregate of that same stream column, of a type whose key
// equality is Compare's (integers, timestamps, intervals, text).
func dominanceOf(j *Join) *JoinDominance {
	if j.Mode != JoinWindow {
		return nil
	}
	for held := 0; held < 2; held++ {
		switch {
		case j.Kind == sql.JoinFull,
			j.Kind == sql.JoinLeft && held == 0,
			j.Kind == sql.JoinRight && held == 1:
			continue
		}
		hn, an := j.Left, j.Right
		hk, ak := j.LeftKeys, j.RightKeys
		if held == 1 {
			hn, an, hk, ak = an, hn, ak, hk
		}
		h, ok := traceLineage(hn)
		if !ok || h.win == nil {
			continue
		}
		acols, groups, a, ok := traceAggregate(an)
		if !ok || !sameRows(a, h) || !sameWindow(*a.win, *h.win) {
			continue
		}
		matched := map[int]bool{} // stream columns of groups equated; lineStart, lineEnd
		key, sign := -1, 0
		for i := range hk {
			hc, ok1 := hk[i].(*sql.ColumnRef)
			ac, ok2 := ak[i].(*sql.ColumnRef)
			if !ok1 || !ok2 || hc.Index < 0 || hc.Index >= len(h.cols) || ac.Index < 0 || ac.Index >= len(acols) {
				continue
			}
			hl, col := h.cols[hc.Index], acols[ac.Index]
			switch {
			case col.ext >= 0 && hl == col.ext && key < 0 && extremeKind(hc.T.Kind) && hc.T == ac.T:
				key, sign = i, col.sign
			case col.ext < 0 && col.line != lineUnknown && hl == col.line:
				matched[hl] = true
			}
		}
		d := &JoinDominance{Side: held, Key: key, Sign: sign}
		if key < 0 {
			d = residualDominance(j, held, h, acols)
		}
		if d == nil || !matched[lineStart] || !matched[lineEnd] {
			continue
		}
		all := true
		for _, g := range groups {
			all = all && matched[g]
		}
		if all {
			return d
		}
	}
	return nil
}

// residualDominance finds in a join's residual condition a conjunct held >= MAX (or
// MAX <= held) or held <= MIN (MIN >= held) of the held column's own values: the held rows
// below the running maximum (above the running minimum) cannot pass it.
func residualDominance(j *Join, held int, h lineage, acols []aggColumn) *JoinDominance {
	lw := len(j.Left.Schema())
	side := func(c *sql.ColumnRef) (int, int) { // side and index in its row
		if c.Index < lw {
			return 0, c.Index
		}
		return 1, c.Index - lw
	}
	var found *JoinDominance
	var walk func(e sql.Expr)
	walk = func(e sql.Expr) {
		c, ok := e.(*sql.Call)
		if !ok || found != nil {
			return
		}
		if c.Func == "AND" {
			for _, a := range c.Args {
				walk(a)
			}
			return
		}
		if len(c.Args) != 2 || c.Func != ">=" && c.Func != "<=" {
			return
		}
		x, ok1 := c.Args[0].(*sql.ColumnRef)
		y, ok2 := c.Args[1].(*sql.ColumnRef)
		if !ok1 || !ok2 || x.T != y.T {
			return
		}
		sign := 1 // x >= y
		if c.Func == "<=" {
			sign = -1
		}
		xs, xi := side(x)
		ys, yi := side(y)
		if xs != held {
			xs, xi, ys, yi, sign = ys, yi, xs, xi, -sign
		}
		if xs != held || ys == held || xi >= len(h.cols) || yi >= len(acols) {
			return
		}
		if a := acols[yi]; a.ext >= 0 && a.ext == h.cols[xi] && a.sign == sign {
			found = &JoinDominance{Side: held, Key: -1, HeldCol: xi, AggCol: yi, Sign: sign}
		}
	}
	walk(j.Residual)
	return found
}

func sameWindow(a, b sql.Window) bool {
	return a.Kind == b.Kind && a.TimeCol == b.TimeCol && a.Size == b.Size && a.Slide == b.Slide && a.Gap == b.Gap &&
		(a.Kind == sql.WindowTumble || a.Kind == sql.WindowHop)
}

// extremeKind reports whether equal join keys of kind k are exactly the values sql.Compare
// finds equal (so "below the maximum" means "cannot equal it").
func extremeKind(k sql.Kind) bool {
	switch k {
	case sql.KindInt, sql.KindBigInt, sql.KindTimestamp, sql.KindInterval, sql.KindVarchar:
		return true
	}
	return false
}
