package planner

import (
	"slices"
	"sort"

	"rsql/sql"
)

// Optimize applies the rewrite rules in order: constant folding, predicate push-down, column
// pruning. The result computes the same rows as l.
func Optimize(l LogicalNode) (LogicalNode, error) {
	l, err := FoldConstants(l)
	if err != nil {
		return nil, err
	}
	l = PushDownPredicates(l)
	if l, err = PruneColumns(l); err != nil {
		return nil, err
	}
	return MergeProjections(l), nil
}

// MergeProjections replaces a projection of a projection with one projection, the inner
// expressions substituted into the outer ones, when no inner expression other than a
// column would then be computed more than once.
func MergeProjections(l LogicalNode) LogicalNode {
	if ch := l.Children(); len(ch) > 0 {
		nc := make([]LogicalNode, len(ch))
		for i, c := range ch {
			nc[i] = MergeProjections(c)
		}
		l = l.WithChildren(nc)
	}
	outer, ok := l.(*Project)
	if !ok {
		return l
	}
	inner, ok := outer.Input.(*Project)
	if !ok {
		return l
	}
	uses := make([]int, len(inner.Exprs))
	for _, e := range outer.Exprs {
		for _, c := range sql.ColumnsUsed(e) {
			if c >= 0 && c < len(uses) {
				uses[c]++
			}
		}
	}
	for i, e := range inner.Exprs {
		if _, col := e.(*sql.ColumnRef); !col && uses[i] > 1 {
			return l
		}
	}
	exprs := make([]sql.Expr, len(outer.Exprs))
	for i, e := range outer.Exprs {
		exprs[i] = substitute(e, inner.Exprs)
	}
	return &Project{Input: inner.Input, Exprs: exprs, Names: outer.Names}
}

// conjuncts splits a predicate at its top-level ANDs.
func conjuncts(e sql.Expr) []sql.Expr {
	if c, ok := e.(*sql.Call); ok && c.Func == "AND" && len(c.Args) == 2 {
		return append(conjuncts(c.Args[0]), conjuncts(c.Args[1])...)
	}
	return []sql.Expr{e}
}

// and joins predicates with AND, left to right; nil for none.
func and(preds []sql.Expr) sql.Expr {
	if len(preds) == 0 {
		return nil
	}
	e := preds[0]
	for _, p := range preds[1:] {
		e = &sql.Call{Func: "AND", Args: []sql.Expr{e, p}, T: sql.TypeBool}
	}
	return e
}

func withFilter(n LogicalNode, preds []sql.Expr) LogicalNode {
	if len(preds) == 0 {
		return n
	}
	return &Filter{Input: n, Pred: and(preds)}
}

// usesOnly reports whether e reads only columns below limit.
func usesOnly(e sql.Expr, limit int) bool {
	for _, c := range sql.ColumnsUsed(e) {
		if c >= limit {
			return false
		}
	}
	return true
}

// substitute replaces each ColumnRef i of e with exprs[i].
func substitute(e sql.Expr, exprs []sql.Expr) sql.Expr {
	out, _ := sql.Transform(e, func(x sql.Expr) (sql.Expr, error) {
		if c, ok := x.(*sql.ColumnRef); ok && c.Index >= 0 && c.Index < len(exprs) {
			return exprs[c.Index], nil
		}
		return x, nil
	})
	return out
}

// PushDownPredicates moves each conjunct of a filter as close to the scan as it can go
// while computing the same rows:
//   - through a projection, with the projected expressions substituted;
//   - below a window assignment when it does not read window_start/window_end;
//   - below an aggregation when it reads only group keys (a HAVING on keys filters whole
//     groups, so it may filter their input rows instead);
//   - adjacent filters merge.
//
// It never moves a predicate below a Limit.
func PushDownPredicates(l LogicalNode) LogicalNode {
	if ch := l.Children(); len(ch) > 0 {
		nc := make([]LogicalNode, len(ch))
		for i, c := range ch {
			nc[i] = PushDownPredicates(c)
		}
		l = l.WithChildren(nc)
	}
	if f, ok := l.(*Filter); ok {
		return pushFilter(f.Input, conjuncts(f.Pred))
	}
	return l
}

// pushFilter returns a plan equivalent to Filter(in, AND(preds)) with preds pushed down.
func pushFilter(in LogicalNode, preds []sql.Expr) LogicalNode {
	switch n := in.(type) {
	case *Filter:
		return pushFilter(n.Input, append(conjuncts(n.Pred), preds...))
	case *Project:
		sub := make([]sql.Expr, len(preds))
		for i, p := range preds {
			sub[i] = substitute(p, n.Exprs)
		}
		return n.WithChildren([]LogicalNode{pushFilter(n.Input, sub)})
	case *WindowAssign:
		return pushBelowAppender(n, n.Input, preds)
	case *TableFunc:
		// Conditions on the input's columns filter before the calls.
		return pushBelowAppender(n, n.Input, preds)
	case *Join:
		lw := len(n.Left.Schema())
		shift := make([]int, len(n.Schema()))
		for i := range shift {
			shift[i] = i - lw
		}
		var lp, rp, stay []sql.Expr
		for _, p := range preds {
			used := sql.ColumnsUsed(p)
			onlyLeft, onlyRight := len(used) > 0, len(used) > 0
			for _, c := range used {
				onlyLeft = onlyLeft && c < lw
				onlyRight = onlyRight && c >= lw
			}
			switch {
			case onlyLeft && (n.Kind == sql.JoinInner || n.Kind == sql.JoinLeft) && n.LeftTable == nil:
				lp = append(lp, p)
			case onlyRight && (n.Kind == sql.JoinInner || n.Kind == sql.JoinRight) && n.Table == nil:
				// (A table's versions are not filtered: an older version must not show
				// through a newer one that fails the filter.)
				r, err := sql.RemapColumns(p, shift)
				if err != nil {
					stay = append(stay, p)
					continue
				}
				rp = append(rp, r)
			default:
				stay = append(stay, p)
			}
		}
		l, r := n.Left, n.Right
		if len(lp) > 0 {
			l = pushFilter(l, lp)
		}
		if len(rp) > 0 {
			r = pushFilter(r, rp)
		}
		return withFilter(n.WithChildren([]LogicalNode{l, r}), stay)
	case *Union:
		// Each input gets the filter (columns are positional).
		ins := make([]LogicalNode, len(n.Inputs))
		for i, in := range n.Inputs {
			ins[i] = pushFilter(in, preds)
		}
		return n.WithChildren(ins)
	case *Aggregate:
		var below, stay []sql.Expr
		for _, p := range preds {
			if usesOnly(p, len(n.Keys)) {
				below = append(below, substitute(p, n.Keys))
			} else {
				stay = append(stay, p)
			}
		}
		if len(below) == 0 {
			return withFilter(n, stay)
		}
		return withFilter(n.WithChildren([]LogicalNode{pushFilter(n.Input, below)}), stay)
	}
	return withFilter(in, preds)
}

// PruneColumns narrows every node to the columns some node above reads: the Scan keeps only
// referenced columns (plus the event-time column of a stream that declares one: watermarks
// are computed from it, and a record without an event time is bad whatever the query reads),
// aggregates no one reads are dropped, and every ColumnRef above is remapped to the narrowed
// rows.
func PruneColumns(l LogicalNode) (LogicalNode, error) {
	p := pruner{}
	all := map[int]bool{}
	for i := range l.Schema() {
		all[i] = true
	}
	n, _, err := p.prune(l, all)
	return n, err
}

// remapSortKeys is keys with their expressions' columns renumbered by m (direction and
// NULLS order kept).
func remapSortKeys(keys []sql.SortKey, m []int) ([]sql.SortKey, error) {
	out := make([]sql.SortKey, len(keys))
	for i, k := range keys {
		e, err := sql.RemapColumns(k.Expr, m)
		if err != nil {
			return nil, err
		}
		k.Expr = e
		out[i] = k
	}
	return out, nil
}

// pruner keeps, at a Scan, the columns needed above it and the stream's event-time column.
type pruner struct{}

func addUsed(set map[int]bool, es ...sql.Expr) {
	for _, e := range es {
		if e == nil {
			continue
		}
		for _, c := range sql.ColumnsUsed(e) {
			set[c] = true
		}
	}
}

func remapAll(es []sql.Expr, m []int) ([]sql.Expr, error) {
	out := make([]sql.Expr, len(es))
	for i, e := range es {
		r, err := sql.RemapColumns(e, m)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func lookup(m []int, i int) int {
	if i < 0 || i >= len(m) {
		return -1
	}
	return m[i]
}

// prune rebuilds node so that it produces at least the columns in need (indexes of its
// output) and returns the mapping from its old output indexes to the new ones (-1: dropped).
func (p pruner) prune(node LogicalNode, need map[int]bool) (LogicalNode, []int, error) {
	switch n := node.(type) {
	case *Sink, *Limit:
		child, m, err := p.prune(n.Children()[0], need)
		if err != nil {
			return nil, nil, err
		}
		return n.WithChildren([]LogicalNode{child}), m, nil

	case *Join:
		lw := len(n.Left.Schema())
		lneed, rneed := map[int]bool{}, map[int]bool{}
		for c := range need {
			if c < lw {
				lneed[c] = true
			} else {
				rneed[c-lw] = true
			}
		}
		addUsed(lneed, n.LeftKeys...)
		addUsed(rneed, n.RightKeys...)
		if n.Residual != nil {
			for _, c := range sql.ColumnsUsed(n.Residual) {
				if c < lw {
					lneed[c] = true
				} else {
					rneed[c-lw] = true
				}
			}
		}
		for _, c := range []int{n.LeftTime, n.LeftEnd, n.AsOf, n.LeftOp} {
			if c >= 0 {
				lneed[c] = true
			}
		}
		if n.HasUntil {
			lneed[n.LeftUntil] = true
		}
		for _, c := range []int{n.RightTime, n.RightEnd, n.RightOp} {
			if c >= 0 {
				rneed[c] = true
			}
		}
		left, lm, err := p.prune(n.Left, lneed)
		if err != nil {
			return nil, nil, err
		}
		right, rm, err := p.prune(n.Right, rneed)
		if err != nil {
			return nil, nil, err
		}
		nlw := len(left.Schema())
		out := make([]int, len(n.Schema()))
		for i := range out {
			if i < lw {
				out[i] = lookup(lm, i)
			} else if r := lookup(rm, i-lw); r >= 0 {
				out[i] = nlw + r
			} else {
				out[i] = -1
			}
		}
		c := *n
		c.Left, c.Right = left, right
		if c.LeftKeys, err = remapAll(n.LeftKeys, lm); err != nil {
			return nil, nil, wrapf(err, "pruning join keys")
		}
		if c.RightKeys, err = remapAll(n.RightKeys, rm); err != nil {
			return nil, nil, wrapf(err, "pruning join keys")
		}
		if n.Residual != nil {
			if c.Residual, err = sql.RemapColumns(n.Residual, out); err != nil {
				return nil, nil, wrapf(err, "pruning join condition")
			}
		}
		for _, f := range []*int{&c.LeftTime, &c.LeftEnd, &c.AsOf, &c.LeftOp} {
			if *f >= 0 {
				*f = lookup(lm, *f)
			}
		}
		if c.HasUntil {
			c.LeftUntil = lookup(lm, c.LeftUntil)
		}
		for _, f := range []*int{&c.RightTime, &c.RightEnd, &c.RightOp} {
			if *f >= 0 {
				*f = lookup(rm, *f)
			}
		}
		return &c, out, nil

	case *Union:
		// Every input keeps exactly the needed columns, in order, so their layouts agree.
		keep := make([]int, 0, len(need))
		for i := range n.Out {
			if need[i] {
				keep = append(keep, i)
			}
		}
		out := make([]int, len(n.Out))
		for i := range out {
			out[i] = -1
		}
		schema := make(sql.Schema, len(keep))
		for j, i := range keep {
			out[i] = j
			schema[j] = n.Out[i]
		}
		ins := make([]LogicalNode, len(n.Inputs))
		for k, in := range n.Inputs {
			child, m, err := p.prune(in, copySet(need))
			if err != nil {
				return nil, nil, err
			}
			csch := child.Schema()
			identity := len(csch) == len(keep)
			exprs := make([]sql.Expr, len(keep))
			names := make([]string, len(keep))
			for j, i := range keep {
				c := lookup(m, i)
				if c < 0 {
					return nil, nil, errorf(sql.CodeInternal, "union column #%d lost while pruning", i)
				}
				identity = identity && c == j
				exprs[j] = &sql.ColumnRef{Index: c, Name: csch[c].Name, T: csch[c].Type}
				names[j] = n.Out[i].Name
			}
			if !identity {
				child = &Project{Input: child, Exprs: exprs, Names: names}
			}
			ins[k] = child
		}
		return &Union{Inputs: ins, Out: schema}, out, nil

	case *TopN:
		in := copySet(need)
		addUsed(in, n.Partition...)
		for _, k := range n.Order {
			addUsed(in, k.Expr)
		}
		for _, c := range []int{n.RowNumber, n.WindowEnd, n.Time} {
			if c >= 0 {
				in[c] = true
			}
		}
		if n.Mode == TableVersions {
			// The change column, last, stays last.
			in[len(n.Input.Schema())-1] = true
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		c := *n
		c.Input = child
		if c.Partition, err = remapAll(n.Partition, m); err != nil {
			return nil, nil, wrapf(err, "pruning TopN")
		}
		if c.Order, err = remapSortKeys(n.Order, m); err != nil {
			return nil, nil, wrapf(err, "pruning TopN")
		}
		for _, f := range []*int{&c.RowNumber, &c.WindowEnd, &c.Time} {
			if *f >= 0 {
				*f = lookup(m, *f)
			}
		}
		return &c, m, nil

	case *Over:
		in := copySet(need)
		addUsed(in, n.Partition...)
		for _, k := range n.Order {
			addUsed(in, k.Expr)
		}
		for _, c := range n.Calls {
			in[c.Col] = true
			if c.Agg.Arg != nil {
				addUsed(in, c.Agg.Arg)
			}
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		c := *n
		c.Input = child
		if c.Partition, err = remapAll(n.Partition, m); err != nil {
			return nil, nil, wrapf(err, "pruning Over")
		}
		if c.Order, err = remapSortKeys(n.Order, m); err != nil {
			return nil, nil, wrapf(err, "pruning Over")
		}
		c.Calls = make([]sql.OverCall, len(n.Calls))
		for i, oc := range n.Calls {
			oc.Col = lookup(m, oc.Col)
			if oc.Agg.Arg != nil {
				e, err := sql.RemapColumns(oc.Agg.Arg, m)
				if err != nil {
					return nil, nil, wrapf(err, "pruning Over")
				}
				oc.Agg.Arg = e
			}
			c.Calls[i] = oc
		}
		return &c, m, nil

	case *Sort:
		in := copySet(need)
		for _, k := range n.Keys {
			addUsed(in, k.Expr)
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		keys := make([]sql.SortKey, len(n.Keys))
		for i, k := range n.Keys {
			e, err := sql.RemapColumns(k.Expr, m)
			if err != nil {
				return nil, nil, wrapf(err, "pruning ORDER BY")
			}
			keys[i] = sql.SortKey{Expr: e, Desc: k.Desc, Nulls: k.Nulls}
		}
		return &Sort{Input: child, Keys: keys}, m, nil

	case *Filter:
		in := copySet(need)
		addUsed(in, n.Pred)
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		pred, err := sql.RemapColumns(n.Pred, m)
		if err != nil {
			return nil, nil, wrapf(err, "pruning filter %s", n.Pred)
		}
		return &Filter{Input: child, Pred: pred}, m, nil

	case *Project:
		in := map[int]bool{}
		out := make([]int, len(n.Exprs))
		var exprs []sql.Expr
		var names []string
		for i, e := range n.Exprs {
			if !need[i] {
				out[i] = -1
				continue
			}
			out[i] = len(exprs)
			exprs = append(exprs, e)
			names = append(names, n.Names[i])
			addUsed(in, e)
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		exprs, err = remapAll(exprs, m)
		if err != nil {
			return nil, nil, wrapf(err, "pruning projection")
		}
		return &Project{Input: child, Exprs: exprs, Names: names}, out, nil

	case *TableFunc:
		width := len(n.Input.Schema())
		in := map[int]bool{}
		for c := range need {
			if c < width {
				in[c] = true
			}
		}
		addUsed(in, n.Args...)
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		args, err := remapAll(n.Args, m)
		if err != nil {
			return nil, nil, wrapf(err, "pruning table function")
		}
		nw := len(child.Schema())
		out := make([]int, width+len(n.Cols))
		copy(out, m)
		for i := range n.Cols {
			out[width+i] = nw + i
		}
		t := *n
		t.Input, t.Args = child, args
		return &t, out, nil

	case *WindowAssign:
		width := len(n.Input.Schema())
		in := map[int]bool{n.Window.TimeCol: true}
		for c := range need {
			if c < width {
				in[c] = true
			}
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		w := n.Window
		if w.TimeCol = lookup(m, w.TimeCol); w.TimeCol < 0 {
			return nil, nil, errorf(sql.CodeInternal, "window time column lost while pruning")
		}
		nw := len(child.Schema())
		out := make([]int, width+2)
		copy(out, m)
		out[width], out[width+1] = nw, nw+1
		return &WindowAssign{Input: child, Window: w}, out, nil

	case *Aggregate:
		nk := len(n.Keys)
		wo := 0
		if n.Window != nil {
			wo = 2
		}
		in := map[int]bool{}
		addUsed(in, n.Keys...)
		if n.Window != nil {
			in[n.Window.TimeCol] = true
			if n.Window.Kind == sql.WindowGiven {
				in[n.Window.EndCol] = true
			}
		}
		out := make([]int, nk+wo+len(n.Aggs))
		for i := 0; i < nk+wo; i++ {
			out[i] = i
		}
		var aggs []sql.AggCall
		for j, g := range n.Aggs {
			if !need[nk+wo+j] {
				out[nk+wo+j] = -1
				continue
			}
			out[nk+wo+j] = nk + wo + len(aggs)
			aggs = append(aggs, g)
			addUsed(in, g.Arg)
		}
		child, m, err := p.prune(n.Input, in)
		if err != nil {
			return nil, nil, err
		}
		keys, err := remapAll(n.Keys, m)
		if err != nil {
			return nil, nil, wrapf(err, "pruning group keys")
		}
		for j := range aggs {
			if aggs[j].Arg != nil {
				if aggs[j].Arg, err = sql.RemapColumns(aggs[j].Arg, m); err != nil {
					return nil, nil, wrapf(err, "pruning aggregate %s", aggText(aggs[j]))
				}
			}
		}
		var win *sql.Window
		if n.Window != nil {
			c := *n.Window
			if c.TimeCol = lookup(m, c.TimeCol); c.TimeCol < 0 {
				return nil, nil, errorf(sql.CodeInternal, "window time column lost while pruning")
			}
			if c.Kind == sql.WindowGiven {
				if c.EndCol = lookup(m, c.EndCol); c.EndCol < 0 {
					return nil, nil, errorf(sql.CodeInternal, "window end column lost while pruning")
				}
			}
			win = &c
		}
		return &Aggregate{Input: child, Keys: keys, Window: win, Aggs: aggs, Emit: n.Emit, TTL: n.TTL, EmitNew: n.EmitNew}, out, nil

	case *Scan:
		if len(n.Columns) == 0 {
			return n, nil, nil
		}
		keep := copySet(need)
		if op := n.Relation.Schema.Index(sql.ChangeColumn); op >= 0 && changelogScan(&Scan{Relation: n.Relation, Columns: []int{op}}) {
			// A changelog table's change column says what each row is (scanChanges), and
			// the primary key of one its source may truncate keys its latest versions
			// (truncatingScan).
			truncating := truncatingScan(&Scan{Relation: n.Relation, Columns: []int{op}})
			for i, c := range n.Columns {
				if c == op || truncating && slices.Contains(n.Relation.PrimaryKey, c) {
					keep[i] = true
				}
			}
		}
		if n.Relation.EventTime >= 0 {
			for i, c := range n.Columns {
				if c == n.Relation.EventTime {
					keep[i] = true
				}
			}
		}
		idx := make([]int, 0, len(keep))
		for i := range keep {
			if i < 0 || i >= len(n.Columns) {
				return nil, nil, errorf(sql.CodeInternal, "column #%d is outside stream %s", i, n.Relation.Name)
			}
			idx = append(idx, i)
		}
		sort.Ints(idx)
		out := make([]int, len(n.Columns))
		for i := range out {
			out[i] = -1
		}
		cols := make([]int, len(idx))
		for j, i := range idx {
			out[i] = j
			cols[j] = n.Columns[i]
		}
		return &Scan{Relation: n.Relation, Columns: cols, Snapshot: n.Snapshot}, out, nil
	}
	return nil, nil, errorf(sql.CodeInternal, "cannot prune %T", node)
}

func copySet(s map[int]bool) map[int]bool {
	out := make(map[int]bool, len(s))
	for k, v := range s {
		if v {
			out[k] = true
		}
	}
	return out
}

// FoldConstants replaces every constant subexpression (no column, no NOW()) with its value
// and drops filters whose predicate folds to TRUE. A subexpression that fails to compile is
// left as it is (Physical reports the error).
func FoldConstants(l LogicalNode) (LogicalNode, error) {
	if ch := l.Children(); len(ch) > 0 {
		nc := make([]LogicalNode, len(ch))
		for i, c := range ch {
			n, err := FoldConstants(c)
			if err != nil {
				return nil, err
			}
			nc[i] = n
		}
		l = l.WithChildren(nc)
	}
	switch n := l.(type) {
	case *Filter:
		pred := foldExpr(n.Pred)
		if lit, ok := pred.(*sql.Literal); ok && lit.V.Truth() {
			return n.Input, nil
		}
		return &Filter{Input: n.Input, Pred: pred}, nil
	case *Project:
		exprs := make([]sql.Expr, len(n.Exprs))
		for i, e := range n.Exprs {
			exprs[i] = foldExpr(e)
		}
		return &Project{Input: n.Input, Exprs: exprs, Names: n.Names}, nil
	case *TableFunc:
		c := *n
		c.Args = make([]sql.Expr, len(n.Args))
		for i, e := range n.Args {
			c.Args[i] = foldExpr(e)
		}
		return &c, nil
	case *Aggregate:
		c := *n
		c.Keys = make([]sql.Expr, len(n.Keys))
		for i, e := range n.Keys {
			c.Keys[i] = foldExpr(e)
		}
		c.Aggs = append([]sql.AggCall(nil), n.Aggs...)
		for i := range c.Aggs {
			if c.Aggs[i].Arg != nil {
				c.Aggs[i].Arg = foldExpr(c.Aggs[i].Arg)
			}
		}
		return &c, nil
	}
	return l, nil
}

func foldExpr(e sql.Expr) sql.Expr {
	out, _ := sql.Transform(e, func(x sql.Expr) (sql.Expr, error) {
		switch x.(type) {
		case *sql.Literal, *sql.ColumnRef:
			return x, nil
		}
		if !sql.IsConstant(x) {
			return simplifyLogic(x), nil
		}
		v, ok := evalConstant(x)
		if !ok {
			return x, nil
		}
		return &sql.Literal{V: v, T: x.Type()}, nil
	})
	return out
}

// evalConstant evaluates a constant expression; false when it cannot be compiled.
func evalConstant(e sql.Expr) (v sql.Value, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f, err := sql.Compile(e)
	if err != nil {
		return sql.Null, false
	}
	return f(nil), true
}

// simplifyLogic drops a constant side of AND/OR: TRUE AND x = x, FALSE AND x = FALSE,
// FALSE OR x = x, TRUE OR x = TRUE (these hold for x NULL too).
func simplifyLogic(x sql.Expr) sql.Expr {
	c, ok := x.(*sql.Call)
	if !ok || len(c.Args) != 2 || (c.Func != "AND" && c.Func != "OR") {
		return x
	}
	for i, a := range c.Args {
		l, ok := a.(*sql.Literal)
		if !ok || l.V.K != sql.KindBool {
			continue
		}
		other := c.Args[1-i]
		switch {
		case c.Func == "AND" && l.V.Truth(), c.Func == "OR" && !l.V.Truth():
			return other
		default:
			return l
		}
	}
	return x
}

// pushBelowAppender pushes the conditions of preds that use only input's columns below n,
// a node whose rows are its input's columns followed by columns of its own (window bounds,
// a table function's), and keeps the others above it.
func pushBelowAppender(n LogicalNode, input LogicalNode, preds []sql.Expr) LogicalNode {
	width := len(input.Schema())
	var below, stay []sql.Expr
	for _, p := range preds {
		if usesOnly(p, width) {
			below = append(below, p)
		} else {
			stay = append(stay, p)
		}
	}
	if len(below) == 0 {
		return withFilter(n, stay)
	}
	return withFilter(n.WithChildren([]LogicalNode{pushFilter(input, below)}), stay)
}
