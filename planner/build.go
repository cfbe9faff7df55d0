package planner

import (
	"rsql/connectors/options"
	"slices"
	"sort"
	"strconv"
	"strings"

	"rsql/sql"
)

// Options configures the physical planning of one continuous query.
type Options struct {
	// Job is the job's name; a shuffle topic is named "<Job>-<stage>-shuffle". Empty means
	// DefaultJob.
	Job string
	// Sink is where the final rows go: a stream (Stream, Connector, Options, Schema of the
	// target) or the client (Stream == ""). An empty Schema becomes the query's output
	// schema; a given one must have as many columns. KeyColumns is always computed by the
	// planner: the output columns that are group keys (window_start/window_end included for a
	// windowed aggregation).
	Sink SinkSpec
	// StateTTL (milliseconds, 0: none) lets state without a natural end be forgotten once
	// it is this far behind the watermark: SELECT DISTINCT and deduplication over an
	// unbounded stream need it (SET state_ttl); a regular join of streams forgets its rows
	// after it (approximate; without it the join is exact).
	StateTTL int64
	// Pull: the query answers once from the current contents of what it reads (a pull
	// query): a table's scan reads its latest version of each key (sql.Relation.IsTable).
	Pull bool
	// Layout is the shape of the stages (0: LayoutCurrent). A stored job is planned again
	// at every start in the layout it was created with: its checkpoints name its operators
	// and shuffle topics by stage, so a plan of another shape would not find its state.
	Layout int
}

// Plan layouts: LayoutFirst exchanges every join's output before an operator that needs
// it partitioned; LayoutJoinSplits keeps a join's output in the split of its key, so an
// operator keyed on the join key (an aggregation, a Top-N, another join) runs in the
// join's stage (docs/architecture.md, "The exchange rule"). A job keeps the layout it was
// created with.
const (
	LayoutFirst      = 1
	LayoutJoinSplits = 2
	LayoutCurrent    = LayoutJoinSplits
)

// DefaultJob is the job name used when Options.Job is empty (e.g. for EXPLAIN).
const DefaultJob = "query"

// ShuffleConnector is the connector of every exchange: shuffle topics live on the broker.
const ShuffleConnector = "broker"

// ShuffleTopic returns the name of the shuffle topic written by stage stage of job.
func ShuffleTopic(job string, stage int) string {
	return job + "-" + strconv.Itoa(stage) + "-shuffle"
}

// Plan runs the whole planner on a bound query: Logical, Optimize, then BuildPhysical with
// the logical sink pointed at opts.Sink.Stream. It returns the optimized logical plan (for
// EXPLAIN) and the physical plan.
func Plan(q *sql.Query, opts Options) (LogicalNode, *Physical, error) {
	l, err := LogicalWith(q, opts)
	if err != nil {
		return nil, nil, err
	}
	if s, ok := l.(*Sink); ok {
		c := *s
		c.Stream = opts.Sink.Stream
		c.Multiset = opts.Sink.Connector == "view"
		l = &c
	}
	if l, err = Optimize(l); err != nil {
		return nil, nil, err
	}
	if l, err = Changelog(l); err != nil {
		return nil, nil, err
	}
	if err := validate(l); err != nil {
		return nil, nil, err
	}
	p, err := BuildPhysical(l, opts)
	if err != nil {
		return nil, nil, err
	}
	return l, p, nil
}

// BuildPhysical maps a logical plan (a tree from Scans up to a Sink) to stages of compiled
// operators. Every expression is compiled once here with sql.Compile. Exchange rule (see the
// package doc): an operator that needs the rows of equal keys in one split (aggregation,
// Top-N, sort) gets an exchange unless its input already arrives partitioned so; the
// exchange ends the stage (after a projection of the columns read above it) and the
// operator starts the next one, which reads the edge. A union of inputs read in one stage
// each (streams, no exchange yet) is one stage with several inputs; otherwise each input is
// exchanged into the union's stage.
func BuildPhysical(l LogicalNode, opts Options) (*Physical, error) {
	if opts.Job == "" {
		opts.Job = DefaultJob
	}
	if opts.Layout == 0 {
		opts.Layout = LayoutCurrent
	}
	if opts.Layout < LayoutFirst || opts.Layout > LayoutCurrent {
		return nil, errorf(sql.CodeInternal, "plan layout %d is not one this release builds (%d to %d)", opts.Layout, LayoutFirst, LayoutCurrent)
	}
	b := &builder{opts: opts, edges: map[*Stage][]*Stage{}}
	if err := checkWritable(opts.Sink); err != nil {
		return nil, err
	}
	sink, ok := l.(*Sink)
	if !ok {
		return nil, errorf(sql.CodeInternal, "plan does not end with a Sink but %s", l)
	}
	sb, err := b.build(sink.Input)
	if err != nil {
		return nil, err
	}
	s := b.opts.Sink
	if s.Stream == "" {
		s.Stream = sink.Stream
	}
	s.Changes = sink.Changes
	if sink.Changes != AppendOnly && len(s.Schema) > 0 && s.Schema.Index(sql.ChangeColumn) < 0 {
		// An updating query's rows end with the change column, which the stream's declared
		// columns do not name.
		s.Schema = append(append(sql.Schema{}, s.Schema...), changeColumn)
	}
	if len(s.Schema) == 0 {
		s.Schema = sink.Schema()
	} else if len(s.Schema) != len(sb.row) {
		return nil, errorf(sql.CodeTypeMismatch, "the query gives %d columns but %s has %d", len(sb.row), s.Stream, len(s.Schema))
	}
	s.KeyColumns = nil
	if sink.Changes != AppendOnly {
		s.KeyColumns = append([]int{}, sink.Key...)
	} else {
		for i := range sb.row {
			if sb.keyPos[i] {
				s.KeyColumns = append(s.KeyColumns, i)
			}
		}
	}
	sb.st.Sink, sb.st.Out = s, sb.port
	return b.finish(), nil
}

// builder accumulates stages while walking the plan up from its scans.
type builder struct {
	opts   Options
	stages []*Stage            // in creation order (upstream first), until finish numbers them
	edges  map[*Stage][]*Stage // a stage's upstream stage per input (nil for a stream input)
}

// sub is where the rows of a subtree come out: a port of a stage being built, their row
// layout, and what is known of their partitioning.
type sub struct {
	st   *Stage
	port Port
	row  sql.Schema
	// part are the row's columns equal values of which share a split (nil: unknown);
	// single: every row is in one split. hashed: the split of a row is queue
	// hash(part, in order) mod the job's exchange queues, as an exchange on part would
	// send it, so rows exchanged on equal keys meet it in the same split.
	part   []int
	single bool
	hashed bool
	// time is the column holding the source's event time (-1: none), delay its watermark
	// delay (for an edge's SourceSpec).
	time  int
	delay int64
	// keyPos are the columns that are group keys (the sink's message key).
	keyPos map[int]bool
}

func (b *builder) newStage(src SourceSpec) *Stage {
	st := &Stage{Inputs: []SourceSpec{src}, Out: FromInput(0)}
	b.stages = append(b.stages, st)
	b.edges[st] = []*Stage{nil}
	return st
}

// addOp adds node to s's stage reading s's port and returns the sub of its output.
func (b *builder) addOp(s sub, node Node, row sql.Schema) sub {
	s.st.Ops = append(s.st.Ops, Op{Node: node, Inputs: []Port{s.port}})
	s.port = FromOp(len(s.st.Ops) - 1)
	if row != nil {
		s.row = row
	}
	return s
}

func (b *builder) build(l LogicalNode) (sub, error) {
	switch n := l.(type) {
	case *Scan:
		rel := n.Relation
		if err := checkReadable(rel); err != nil {
			return sub{}, err
		}
		opts, err := options.Of(rel.Options)
		if err != nil {
			return sub{}, errorf(sql.CodeInvalidValue, "stream %s: %v", rel.Name, err)
		}
		src := SourceSpec{
			Stream:         rel.Name,
			Connector:      rel.Connector(),
			Options:        opts,
			Schema:         rel.Schema,
			Columns:        append([]int{}, n.Columns...),
			EventTime:      -1,
			WatermarkDelay: rel.WatermarkDelay,
			FromStage:      -1,
		}
		if rel.IsTable {
			src.PrimaryKey = append([]int{}, rel.PrimaryKey...)
		}
		pos := map[int]int{}
		for i, c := range n.Columns {
			if c < 0 || c >= len(rel.Schema) {
				return sub{}, errorf(sql.CodeInternal, "scan column #%d is outside stream %s", c, rel.Name)
			}
			if c == rel.EventTime {
				src.EventTime = i
			}
			pos[c] = i
		}
		s := sub{st: b.newStage(src), port: FromInput(0), row: n.Schema(), single: singleSplit(rel),
			time: src.EventTime, delay: rel.WatermarkDelay}
		if pc := partitionColumns(rel); pc != nil {
			for _, c := range pc {
				i, ok := pos[c]
				if !ok {
					s.part = nil
					break
				}
				s.part = append(s.part, i)
			}
		}
		return s, nil

	case *Filter:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		fs, memo, err := compileShared([]sql.Expr{n.Pred}, "filter")
		if err != nil {
			return s, err
		}
		return b.addOp(s, &FilterNode{Pred: fs[0], Text: n.Pred.String(), Memo: memo}, nil), nil

	case *Project:
		// A filter right below is compiled with the projection: the subexpressions they
		// share are computed once per row (sql.CompileShared).
		exprs, filter := n.Exprs, (*Filter)(nil)
		input := n.Input
		if f, ok := n.Input.(*Filter); ok {
			filter, input = f, f.Input
			exprs = append([]sql.Expr{f.Pred}, n.Exprs...)
		}
		s, err := b.build(input)
		if err != nil {
			return s, err
		}
		fs, memo, err := compileShared(exprs, "select list")
		if err != nil {
			return s, err
		}
		p := &ProjectNode{Exprs: make([]Evaluator, len(n.Exprs)), Schema: n.Schema(), Texts: make([]string, len(n.Exprs)), Memo: memo}
		if filter != nil {
			s = b.addOp(s, &FilterNode{Pred: fs[0], Text: filter.Pred.String(), Memo: memo}, nil)
			fs, p.AfterFilter = fs[1:], memo != nil
		}
		p.Identity = len(n.Exprs) == len(s.row)
		keyPos := map[int]bool{}
		from := map[int]int{} // input column -> first output column passing it through
		for i, e := range n.Exprs {
			p.Exprs[i], p.Texts[i] = fs[i], aliased(e, n.Names[i])
			c, ok := e.(*sql.ColumnRef)
			p.Identity = p.Identity && ok && c.Index == i && c.T == s.row[i].Type
			if ok {
				if s.keyPos[c.Index] {
					keyPos[i] = true
				}
				if _, seen := from[c.Index]; !seen {
					from[c.Index] = i
				}
			}
		}
		var part []int
		for _, c := range s.part {
			i, ok := from[c]
			if !ok {
				part = nil
				break
			}
			part = append(part, i)
		}
		time := -1
		if i, ok := from[s.time]; ok && s.time >= 0 {
			time = i
		}
		s = b.addOp(s, p, p.Schema)
		s.part, s.keyPos, s.time = part, keyPos, time
		return s, nil

	case *WindowAssign:
		if n.Window.Kind == sql.WindowSession {
			return sub{}, errorf(sql.CodeNotSupported, "SESSION windows need an aggregation (GROUP BY)")
		}
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		return b.addOp(s, &WindowAssignNode{Window: windowSpec(n.Window), Schema: n.Schema()}, n.Schema()), nil

	case *TableFunc:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		t, err := tableFuncNode(n)
		if err != nil {
			return s, err
		}
		// The input's columns keep their places: partitioning and time carry over.
		return b.addOp(s, t, t.Schema), nil

	case *Aggregate:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		hashed := false
		if b.needsExchange(s, n.Keys) {
			used := map[int]bool{}
			addUsed(used, n.Keys...)
			for _, g := range n.Aggs {
				addUsed(used, g.Arg)
			}
			if n.Retracting {
				used[len(s.row)-1] = true
			}
			if n.Window != nil {
				used[n.Window.TimeCol] = true
				if n.Window.Kind == sql.WindowGiven {
					used[n.Window.EndCol] = true
				}
				if s.time >= 0 {
					used[s.time] = true
				}
			}
			var m []int
			if s, m, err = b.exchange(s, n.Keys, used, n.Window != nil); err != nil {
				return s, err
			}
			if n, err = remapAggregate(n, m); err != nil {
				return s, err
			}
			hashed = !slices.ContainsFunc(n.Keys, sql.CallsVolatile)
		}
		a, err := aggregateNode(n)
		if err != nil {
			return s, err
		}
		a.KeysHashed = hashed
		s = b.addOp(s, a, a.Schema)
		s.part, s.time, s.hashed = nil, -1, false
		s.keyPos = map[int]bool{}
		for i := range a.Keys {
			s.keyPos[i] = true
			s.part = append(s.part, i)
		}
		if a.Window.Kind != WindowNone {
			s.keyPos[len(a.Keys)], s.keyPos[len(a.Keys)+1] = true, true
		}
		return s, nil

	case *TopN:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		if !n.AtSource {
			if s, err = b.exchangeRows(s, n.Partition); err != nil {
				return s, err
			}
		}
		t, err := topNNode(n)
		if err != nil {
			return s, err
		}
		return b.addOp(s, t, nil), nil

	case *Over:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		if s, err = b.exchangeRows(s, n.Partition); err != nil {
			return s, err
		}
		o, err := overNode(n)
		if err != nil {
			return s, err
		}
		return b.addOp(s, o, nil), nil

	case *Sort:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		if !s.single {
			used := map[int]bool{}
			for i := range s.row {
				used[i] = true
			}
			if s, _, err = b.exchange(s, nil, used, false); err != nil {
				return s, err
			}
		}
		keys, texts, err := sortSpecs(n.Keys)
		if err != nil {
			return s, err
		}
		sn := &SortNode{Keys: keys, Texts: texts, Changes: n.Changes, Key: n.Key}
		if n.Changes != AppendOnly {
			sn.Schema = n.Schema()
			return b.addOp(s, sn, sn.Schema), nil
		}
		return b.addOp(s, sn, nil), nil

	case *Limit:
		s, err := b.build(n.Input)
		if err != nil {
			return s, err
		}
		if n.N < -1 || n.Offset < 0 {
			return s, errorf(sql.CodeInvalidValue, "LIMIT %d OFFSET %d is negative", n.N, n.Offset)
		}
		return b.addOp(s, &LimitNode{N: n.N, Offset: n.Offset}, nil), nil

	case *Join:
		return b.join(n)
	case *Union:
		var ins []sub
		for _, in := range n.Inputs {
			s, err := b.build(in)
			if err != nil {
				return s, err
			}
			ins = append(ins, s)
		}
		return b.union(ins, n.Out)
	}
	return sub{}, errorf(sql.CodeInternal, "unexpected %T inside a plan", l)
}

// needsExchange reports whether rows arriving as s must be exchanged so that rows with
// equal keys share a split.
// exchangeRows partitions s by partition when its rows are not partitioned so already,
// with every column going across (an operator whose rows are its input's: Top-N, window
// aggregates).
func (b *builder) exchangeRows(s sub, partition []sql.Expr) (sub, error) {
	if !b.needsExchange(s, partition) {
		return s, nil
	}
	used := map[int]bool{}
	for i := range s.row {
		used[i] = true
	}
	s, _, err := b.exchange(s, partition, used, true)
	return s, err
}

func (b *builder) needsExchange(s sub, keys []sql.Expr) bool {
	if s.single {
		return false
	}
	if len(keys) == 0 || s.part == nil {
		return true
	}
	keyCols := map[int]bool{}
	for _, k := range keys {
		if c, ok := k.(*sql.ColumnRef); ok {
			keyCols[c.Index] = true
		}
	}
	for _, p := range s.part {
		if !keyCols[p] {
			return true
		}
	}
	return false
}

// exchange ends s's stage with a projection of the used columns and an exchange on keys
// (no keys: every row to one queue), starts the next stage reading that edge, and returns
// the sub of its rows and the mapping from s's columns to the shuffled row's (-1: not
// carried). windowed says the consumer works in event time (the edge's SourceSpec names
// the event-time column then, for EXPLAIN).
func (b *builder) exchange(s sub, keys []sql.Expr, used map[int]bool, windowed bool) (sub, []int, error) {
	cols := make([]int, 0, len(used))
	for c := range used {
		cols = append(cols, c)
	}
	sort.Ints(cols)
	m := make([]int, len(s.row))
	for i := range m {
		m[i] = -1
	}
	for j, c := range cols {
		if c < 0 || c >= len(s.row) {
			return s, nil, errorf(sql.CodeInternal, "exchange reads column #%d of a %d-column row", c, len(s.row))
		}
		m[c] = j
	}
	shuffled := make(sql.Schema, len(cols))
	for j, c := range cols {
		shuffled[j] = s.row[c]
	}
	if len(cols) != len(s.row) {
		p := &ProjectNode{Exprs: make([]Evaluator, len(cols)), Schema: shuffled, Texts: make([]string, len(cols))}
		for j, c := range cols {
			ref := &sql.ColumnRef{Index: c, Name: s.row[c].Name, T: s.row[c].Type}
			f, err := compile(ref, "exchange projection")
			if err != nil {
				return s, nil, err
			}
			p.Exprs[j], p.Texts[j] = f, ref.Name
		}
		s = b.addOp(s, p, shuffled)
	}
	rkeys, err := remapAll(keys, m)
	if err != nil {
		return s, nil, wrapf(err, "exchange keys")
	}
	x := &ExchangeNode{Keys: make([]Evaluator, len(rkeys)), Texts: make([]string, len(rkeys))}
	for i, k := range rkeys {
		f, err := compile(k, "exchange key")
		if err != nil {
			return s, nil, err
		}
		x.Keys[i], x.Texts[i] = f, k.String()
	}
	srcOpts := map[string]string{}
	if len(rkeys) == 0 {
		x.Queues = 1
		srcOpts["queues"] = "1"
	}
	s.st.Exchange, s.st.Out = x, s.port
	src := SourceSpec{Connector: ShuffleConnector, Options: engineOptions(srcOpts), Schema: shuffled,
		Columns: make([]int, len(cols)), EventTime: -1, WatermarkDelay: s.delay}
	for j := range cols {
		src.Columns[j] = j
	}
	time := -1
	if s.time >= 0 {
		time = m[s.time]
	}
	if windowed && time >= 0 {
		src.EventTime = time
	}
	up := s.st
	next := b.newStage(src)
	b.edges[next][0] = up
	out := sub{st: next, port: FromInput(0), row: shuffled, single: x.Queues == 1, time: time, delay: s.delay,
		keyPos: map[int]bool{}}
	for _, k := range rkeys {
		c, ok := k.(*sql.ColumnRef)
		if !ok {
			out.part = nil
			break
		}
		out.part = append(out.part, c.Index)
	}
	out.hashed = out.part != nil && !out.single
	return out, m, nil
}

// union puts the inputs' rows together. Inputs each read in a stage of their own that
// reads streams only and has no exchange yet are merged into one stage with several
// inputs; otherwise every input is exchanged (on all its columns) into a new stage.
func (b *builder) union(ins []sub, out sql.Schema) (sub, error) {
	mergeable := true
	seen := map[*Stage]bool{}
	for _, s := range ins {
		if seen[s.st] || s.st.Exchange != nil {
			mergeable = false
		}
		seen[s.st] = true
		for _, up := range b.edges[s.st] {
			if up != nil {
				mergeable = false
			}
		}
	}
	u := &UnionNode{Schema: out}
	if mergeable {
		m := ins[0].st
		ports := []Port{ins[0].port}
		for _, s := range ins[1:] {
			ports = append(ports, b.mergeInto(m, s.st, s.port))
		}
		m.Ops = append(m.Ops, Op{Node: u, Inputs: ports})
		return sub{st: m, port: FromOp(len(m.Ops) - 1), row: out, time: -1, keyPos: map[int]bool{}}, nil
	}
	var ups []*Stage
	for i, s := range ins {
		keys := make([]sql.Expr, 0, len(s.row))
		used := map[int]bool{}
		for c, col := range s.row {
			used[c] = true
			if c == len(s.row)-1 && col.Name == sql.ChangeColumn && out[len(out)-1].Name == sql.ChangeColumn {
				// A changelog's row is routed by its values, not its change: a row's
				// delete follows its insert into the same split, in order.
				continue
			}
			keys = append(keys, &sql.ColumnRef{Index: c, Name: col.Name, T: col.Type})
		}
		x, _, err := b.exchange(s, keys, used, false)
		if err != nil {
			return x, err
		}
		// x.st is a fresh stage reading the edge: fold its input into the union's stage.
		ups = append(ups, b.edges[x.st][0])
		b.dropStage(x.st)
		_ = i
	}
	st := &Stage{}
	b.stages = append(b.stages, st)
	var ports []Port
	for i, up := range ups {
		st.Inputs = append(st.Inputs, SourceSpec{Connector: ShuffleConnector, Options: engineOptions(map[string]string{}), Schema: ins[i].row,
			Columns: identityCols(len(ins[i].row)), EventTime: -1, WatermarkDelay: ins[i].delay})
		b.edges[st] = append(b.edges[st], up)
		ports = append(ports, FromInput(i))
	}
	st.Ops = append(st.Ops, Op{Node: u, Inputs: ports})
	return sub{st: st, port: FromOp(0), row: out, time: -1, keyPos: map[int]bool{}}, nil
}

// join builds a join: both sides exchanged on their keys (the same number of queues) into
// one stage whose JoinNode reads input 0 (left) and 1 (right).
func (b *builder) join(n *Join) (sub, error) {
	if n.Mode == JoinLookup {
		return b.lookupJoin(n)
	}
	var sides [2]sub
	for i, side := range []LogicalNode{n.Left, n.Right} {
		s, err := b.build(side)
		if err != nil {
			return s, err
		}
		sides[i] = s
	}
	rows := []sql.Schema{sides[0].row, sides[1].row}
	// A side already split by its join keys, as an exchange on them would split it (the
	// output of a join on the same key), is not exchanged again: the join runs in its stage,
	// the other side exchanged into it (LayoutJoinSplits; one side at most).
	keep := -1
	if b.opts.Layout >= LayoutJoinSplits {
		for i, keys := range [][]sql.Expr{n.LeftKeys, n.RightKeys} {
			if splitBy(sides[i], keys) {
				keep = i
				break
			}
		}
	}
	var st *Stage
	var ports [2]Port
	if keep >= 0 {
		st, ports[keep] = sides[keep].st, sides[keep].port
	} else {
		st = &Stage{}
		b.stages = append(b.stages, st)
	}
	for i, s := range sides {
		if i == keep {
			continue
		}
		keys := n.LeftKeys
		if i == 1 {
			keys = n.RightKeys
		}
		used := map[int]bool{}
		for c := range s.row {
			used[c] = true
		}
		x, _, err := b.exchange(s, keys, used, true)
		if err != nil {
			return x, err
		}
		up := b.edges[x.st][0]
		b.dropStage(x.st)
		src := SourceSpec{Connector: ShuffleConnector, Options: engineOptions(map[string]string{}), Schema: rows[i],
			Columns: identityCols(len(rows[i])), EventTime: -1, WatermarkDelay: s.delay}
		ports[i] = FromInput(len(st.Inputs))
		st.Inputs = append(st.Inputs, src)
		b.edges[st] = append(b.edges[st], up)
	}
	jn := &JoinNode{Kind: n.Kind, Mode: n.Mode, LeftTime: n.LeftTime, RightTime: n.RightTime, Lower: n.Lower, Upper: n.Upper,
		LowerOpen: n.LowerOpen, UpperOpen: n.UpperOpen, HasUntil: n.HasUntil, LeftUntil: n.LeftUntil, LeftEnd: n.LeftEnd, RightEnd: n.RightEnd, AsOf: n.AsOf,
		RightOp: n.RightOp, TTL: n.TTL, LeftWidth: len(rows[0]), RightWidth: len(rows[1]), Schema: n.Schema(), Text: n.String(),
		Dominance: dominanceOf(n), LeftChanges: n.LeftChanges, RightChanges: n.RightChanges, Changes: n.Changes,
		RightTable: n.Mode == JoinRegular && n.Table != nil, LeftTable: n.LeftTable != nil, LeftOp: n.LeftOp}
	if n.LeftChanges {
		jn.LeftWidth--
	}
	if n.RightChanges {
		jn.RightWidth--
	}
	for i := range n.LeftKeys {
		lk, err := compile(n.LeftKeys[i], "join key")
		if err != nil {
			return sub{}, err
		}
		rk, err := compile(n.RightKeys[i], "join key")
		if err != nil {
			return sub{}, err
		}
		jn.LeftKeys, jn.RightKeys = append(jn.LeftKeys, lk), append(jn.RightKeys, rk)
	}
	if n.Residual != nil {
		f, err := compile(n.Residual, "join condition")
		if err != nil {
			return sub{}, err
		}
		jn.Residual = f
	}
	st.Ops = append(st.Ops, Op{Node: jn, Inputs: ports[:]})
	out := sub{st: st, port: FromOp(len(st.Ops) - 1), row: n.Schema(), time: -1, keyPos: map[int]bool{}}
	if b.opts.Layout >= LayoutJoinSplits {
		out.part = joinPart(n, jn)
		out.hashed = out.part != nil
	}
	return out, nil
}

// splitBy reports whether s's rows are split by keys, in their order, as an exchange on
// keys would split them.
func splitBy(s sub, keys []sql.Expr) bool {
	if !s.hashed || s.single || len(keys) == 0 || len(s.part) != len(keys) || s.st.Exchange != nil {
		return false
	}
	for i, k := range keys {
		if c, ok := k.(*sql.ColumnRef); !ok || c.Index != s.part[i] {
			return false
		}
	}
	return true
}

// joinPart are the columns of join n's output whose values split it (nil: none): both
// sides are split by their keys, so a row is in the split of its preserved side's key
// columns — the left's for an inner or left join, the right's for a right join (mapped
// past the left's columns); a full join's rows of either side alone are in the split of
// that side's key, with the other side's NULL. Only keys that are columns qualify.
func joinPart(n *Join, jn *JoinNode) []int {
	keys, base, width := n.LeftKeys, 0, jn.LeftWidth
	switch n.Kind {
	case sql.JoinInner, sql.JoinLeft:
	case sql.JoinRight:
		keys, base, width = n.RightKeys, jn.LeftWidth, jn.RightWidth
	default:
		return nil
	}
	if len(keys) == 0 {
		return nil
	}
	part := make([]int, len(keys))
	for i, k := range keys {
		c, ok := k.(*sql.ColumnRef)
		if !ok || c.Index < 0 || c.Index >= width {
			return nil
		}
		part[i] = base + c.Index
	}
	return part
}

func identityCols(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// mergeInto moves stage from's inputs and operators into stage into and returns where the
// port p of from now is.
func (b *builder) mergeInto(into, from *Stage, p Port) Port {
	ni, no := len(into.Inputs), len(into.Ops)
	move := func(p Port) Port {
		if p.Op >= 0 {
			return FromOp(p.Op + no)
		}
		return FromInput(p.Input + ni)
	}
	into.Inputs = append(into.Inputs, from.Inputs...)
	b.edges[into] = append(b.edges[into], b.edges[from]...)
	for _, op := range from.Ops {
		ports := make([]Port, len(op.Inputs))
		for i, q := range op.Inputs {
			ports[i] = move(q)
		}
		into.Ops = append(into.Ops, Op{Node: op.Node, Inputs: ports})
	}
	b.dropStage(from)
	return move(p)
}

func (b *builder) dropStage(st *Stage) {
	for i, s := range b.stages {
		if s == st {
			b.stages = append(b.stages[:i], b.stages[i+1:]...)
			break
		}
	}
	delete(b.edges, st)
}

// finish numbers the stages upstream first and names the edges: a stage's exchange writes
// the shuffle topic "<job>-<id>-shuffle", which its downstream stage's input reads.
func (b *builder) finish() *Physical {
	// Creation order is upstream first except for stages made before their inputs'
	// exchanges were known (unions): order by depth.
	var order []*Stage
	done := map[*Stage]bool{}
	var visit func(st *Stage)
	visit = func(st *Stage) {
		if done[st] {
			return
		}
		done[st] = true
		for _, up := range b.edges[st] {
			if up != nil {
				visit(up)
			}
		}
		order = append(order, st)
	}
	for _, st := range b.stages {
		visit(st)
	}
	for i, st := range order {
		st.ID = i
	}
	for _, st := range order {
		for i, up := range b.edges[st] {
			if up == nil {
				continue
			}
			topic := ShuffleTopic(b.opts.Job, up.ID)
			up.Exchange.Topic = topic
			in := &st.Inputs[i]
			in.Stream, in.FromStage = topic, up.ID
			opts := map[string]string{"topic": topic}
			for k, v := range in.Options.Raw {
				opts[k] = v
			}
			in.Options = engineOptions(opts)
		}
	}
	return &Physical{Stages: order}
}

// remapAggregate rewrites an aggregation over the row of an exchange (m maps the old
// columns to the new).
func remapAggregate(agg *Aggregate, m []int) (*Aggregate, error) {
	na := *agg
	na.Aggs = append([]sql.AggCall(nil), agg.Aggs...)
	var err error
	if na.Keys, err = remapAll(agg.Keys, m); err != nil {
		return nil, wrapf(err, "exchange keys")
	}
	for i := range na.Aggs {
		if na.Aggs[i].Arg != nil {
			if na.Aggs[i].Arg, err = sql.RemapColumns(na.Aggs[i].Arg, m); err != nil {
				return nil, wrapf(err, "exchange aggregate")
			}
		}
	}
	if agg.Window != nil {
		w := *agg.Window
		w.TimeCol = m[w.TimeCol]
		if w.Kind == sql.WindowGiven {
			w.EndCol = m[w.EndCol]
		}
		na.Window = &w
	}
	return &na, nil
}

// engineOptions parses options the planner made itself (a shuffle topic's), which are
// valid by construction.
func engineOptions(raw map[string]string) options.StreamOptions {
	o, err := options.Of(raw)
	if err != nil {
		panic("planner: options of a shuffle topic: " + err.Error())
	}
	return o
}

// singleSplit reports whether rel is read as exactly one split: a file, a view, constants,
// or a topic declared with queues = 1.
func singleSplit(rel *sql.Relation) bool {
	if c := rel.Connector(); c == "file" || c == "values" || rel.IsView {
		return true
	}
	o, err := options.Of(rel.Options)
	return err == nil && o.Queues == 1
}

// partitionColumns returns the columns of rel named by its partitioned_by (or key) option:
// the columns its producer keys records by, so equal values share a queue. Nil when the
// option is absent or names an unknown column.
func partitionColumns(rel *sql.Relation) []int {
	o, err := options.Of(rel.Options)
	if err != nil || len(o.PartitionedBy) == 0 {
		return nil
	}
	var out []int
	for _, name := range o.PartitionedBy {
		i := rel.Schema.Index(name)
		if i < 0 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// compileShared compiles expressions evaluated one after the other over each row, their
// common subexpressions through one memo (sql.CompileShared; nil when none).
func compileShared(es []sql.Expr, where string) ([]Evaluator, *sql.Memo, error) {
	fs, memo, err := sql.CompileShared(es)
	if err != nil {
		return nil, nil, wrapCompile(err, where, es)
	}
	return fs, memo, nil
}

// wrapCompile names the expressions es (compiled together as where) in err.
func wrapCompile(err error, where string, es []sql.Expr) error {
	texts := make([]string, len(es))
	for i, e := range es {
		texts[i] = e.String()
	}
	return wrapf(err, "compiling %s %s", where, strings.Join(texts, ", "))
}

func compile(e sql.Expr, where string) (Evaluator, error) {
	f, err := sql.Compile(e)
	if err != nil {
		return nil, wrapf(err, "compiling %s %s", where, e)
	}
	return f, nil
}

func windowSpec(w sql.Window) WindowSpec {
	s := WindowSpec{Kind: w.Kind, Time: w.TimeCol, Size: w.Size, Slide: w.Slide, Gap: w.Gap}
	if w.Kind == sql.WindowGiven {
		s.End = w.EndCol
	}
	return s
}

func aggregateNode(n *Aggregate) (*AggregateNode, error) {
	a := &AggregateNode{
		Keys:       make([]Evaluator, len(n.Keys)),
		KeyTypes:   make([]sql.Type, len(n.Keys)),
		Texts:      make([]string, len(n.Keys)),
		Aggs:       make([]AggSpec, len(n.Aggs)),
		Emit:       n.Emit,
		Schema:     n.Schema(),
		TTL:        n.TTL,
		EmitNew:    n.EmitNew,
		Changes:    n.Changes,
		Retracting: n.Retracting,
	}
	if n.Window != nil {
		a.Window = windowSpec(*n.Window)
	}
	for i, k := range n.Keys {
		f, err := compile(k, "group key")
		if err != nil {
			return nil, err
		}
		a.Keys[i], a.KeyTypes[i], a.Texts[i] = f, k.Type(), k.String()
	}
	// The arguments are compiled together: the conditions of those that are CASE WHEN p
	// THEN ... END are computed once per row (sql.CompileConds).
	var args []sql.Expr
	argAt := make([]int, len(n.Aggs)+1) // aggregate i's arguments: args[argAt[i]:argAt[i+1]]
	for i, g := range n.Aggs {
		args = append(args, g.Args()...)
		argAt[i+1] = len(args)
	}
	evs, conds, shapes, err := sql.CompileConds(args)
	if err != nil {
		return nil, wrapCompile(err, "aggregate arguments", args)
	}
	a.Conds = conds
	for i, g := range n.Aggs {
		spec, err := aggSpecOf(g, evs[argAt[i]:argAt[i+1]])
		if err != nil {
			return nil, err
		}
		a.Aggs[i] = spec
	}
	a.Families = distinctFamilies(n.Aggs)
	if conds != nil {
		a.FamilyShapes = familyShapes(n.Aggs, argAt, a.Families, shapes)
	}
	return a, nil
}

// familyShapes returns, per family, the shapes of its members' arguments when each is the
// family's column (unfiltered, or the THEN of a CASE whose condition is in Conds), or nil
// (AggregateNode.FamilyShapes); aggregate j's argument's shape is shapes[argAt[j]].
func familyShapes(aggs []sql.AggCall, argAt []int, fams [][]int, shapes []sql.CaseShape) [][]sql.CaseShape {
	out := make([][]sql.CaseShape, len(fams))
	for f, fam := range fams {
		col, _ := distinctColumn(aggs[fam[0]])
		members := make([]sql.CaseShape, len(fam))
		for m, j := range fam {
			s := shapes[argAt[j]]
			_, isCase := aggs[j].Arg.(*sql.Case)
			if s.Column != col || isCase && (s.Cond < 0 || !s.NullElse) {
				members = nil
				break
			}
			members[m] = s
		}
		out[f] = members
	}
	return out
}

// distinctFamilies finds the families of COUNT(DISTINCT) calls over one column
// (AggregateNode.Families).
func distinctFamilies(aggs []sql.AggCall) [][]int {
	byCol := map[int][]int{}
	var cols []int
	for i, g := range aggs {
		col, ok := distinctColumn(g)
		if !ok {
			continue
		}
		if byCol[col] == nil {
			cols = append(cols, col)
		}
		byCol[col] = append(byCol[col], i)
	}
	var fams [][]int
	for _, col := range cols {
		for f := byCol[col]; len(f) >= 2; f = f[min(len(f), sql.MaxFamilyMembers):] {
			fams = append(fams, f[:min(len(f), sql.MaxFamilyMembers)])
		}
	}
	return fams
}

// distinctColumn returns the input column whose distinct values g counts when g is the
// built-in COUNT(DISTINCT x) or COUNT(DISTINCT CASE WHEN p THEN x [ELSE NULL] END) of a
// column x.
func distinctColumn(g sql.AggCall) (int, bool) {
	if def, _ := g.Aggregate(); def == nil || def.User || !strings.EqualFold(g.Func, "COUNT") || !g.Distinct || g.Star {
		return 0, false
	}
	arg := g.Arg
	if c, ok := arg.(*sql.Case); ok {
		if c.Operand != nil || len(c.Whens) != 1 {
			return 0, false
		}
		if l, ok := c.Else.(*sql.Literal); c.Else != nil && (!ok || l.V.K != sql.KindNull) {
			return 0, false
		}
		arg = c.Thens[0]
	}
	if r, ok := arg.(*sql.ColumnRef); ok {
		return r.Index, true
	}
	return 0, false
}

func aggSpec(g sql.AggCall) (AggSpec, error) { return aggSpecOf(g, nil) }

// aggSpecOf is aggSpec with g's arguments compiled (nil: compiled here).
func aggSpecOf(g sql.AggCall, args []Evaluator) (AggSpec, error) {
	t, err := aggResultType(g)
	if err != nil {
		return AggSpec{}, err
	}
	def, _ := g.Aggregate()
	g.T, g.Star = t, isStar(g)
	f, err := def.New(g)
	if err != nil {
		return AggSpec{}, err
	}
	s := AggSpec{Func: f, Type: t, Text: aggText(g), MayFail: def.User}
	for i, a := range g.Args() {
		var ev Evaluator
		if args != nil {
			ev = args[i]
		} else if ev, err = compile(a, "aggregate argument"); err != nil {
			return AggSpec{}, err
		}
		s.Args = append(s.Args, ev)
		s.ArgTypes = append(s.ArgTypes, a.Type())
	}
	return s, nil
}

func sortSpecs(keys []sql.SortKey) ([]SortSpec, []string, error) {
	out := make([]SortSpec, len(keys))
	texts := make([]string, len(keys))
	for i, k := range keys {
		f, err := compile(k.Expr, "sort key")
		if err != nil {
			return nil, nil, err
		}
		out[i] = SortSpec{Eval: f, Desc: k.Desc, NullsFirst: k.NullsFirst()}
		texts[i] = k.Expr.String()
		if k.Desc {
			texts[i] += " DESC"
		}
		if k.NullsFirst() != k.Desc {
			texts[i] += map[bool]string{true: " NULLS FIRST", false: " NULLS LAST"}[k.NullsFirst()]
		}
	}
	return out, texts, nil
}

func overNode(n *Over) (*OverNode, error) {
	o := &OverNode{Preceding: n.Preceding, Bounded: n.Bounded, Changes: n.Changes, Retracting: n.Retracting,
		Schema: n.Schema(), Text: n.String()}
	for _, p := range n.Partition {
		f, err := compile(p, "partition key")
		if err != nil {
			return nil, err
		}
		o.Partition = append(o.Partition, f)
	}
	var err error
	if o.Order, _, err = sortSpecs(n.Order); err != nil {
		return nil, err
	}
	for _, c := range n.Calls {
		spec, err := aggSpec(c.Agg)
		if err != nil {
			return nil, err
		}
		o.Aggs = append(o.Aggs, spec)
		o.Cols = append(o.Cols, c.Col)
	}
	return o, nil
}

func topNNode(n *TopN) (*TopNNode, error) {
	t := &TopNNode{N: n.N, RowNumber: n.RowNumber, Mode: n.Mode, WindowEnd: n.WindowEnd, Time: n.Time, TTL: n.TTL,
		Latest: n.Latest, Schema: n.Schema(), Changes: n.Changes, Retracting: n.Retracting, AtSource: n.AtSource}
	for _, p := range n.Partition {
		f, err := compile(p, "partition key")
		if err != nil {
			return nil, err
		}
		t.Partition = append(t.Partition, f)
		t.PartitionTexts = append(t.PartitionTexts, p.String())
	}
	var err error
	if t.Order, t.OrderTexts, err = sortSpecs(n.Order); err != nil {
		return nil, err
	}
	return t, nil
}
