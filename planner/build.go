package planner

import (
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
}

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
	l, err := Logical(q)
	if err != nil {
		return nil, nil, err
	}
	if s, ok := l.(*Sink); ok {
		c := *s
		c.Stream = opts.Sink.Stream
		l = &c
	}
	if l, err = Optimize(l); err != nil {
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

// BuildPhysical maps a logical plan (a chain from a Scan up to a Sink) to stages of compiled
// operators. Every expression is compiled once here with sql.Compile. An aggregation whose
// input is not already partitioned by its group key gets an exchange (see the package doc):
// the plan splits into stage 0 (source → filters → projection of the columns the aggregate
// reads → exchange) and stage 1 (the shuffle topic → aggregate → ... → sink).
func BuildPhysical(l LogicalNode, opts Options) (*Physical, error) {
	if opts.Job == "" {
		opts.Job = DefaultJob
	}
	chain, err := flatten(l)
	if err != nil {
		return nil, err
	}
	scan := chain[0].(*Scan)
	rel := scan.Relation
	b := &builder{opts: opts}
	src := SourceSpec{
		Stream:         rel.Name,
		Connector:      rel.Connector(),
		Options:        rel.Options,
		Schema:         rel.Schema,
		Columns:        append([]int(nil), scan.Columns...),
		EventTime:      -1,
		WatermarkDelay: rel.WatermarkDelay,
		FromStage:      -1,
	}
	for i, c := range scan.Columns {
		if c < 0 || c >= len(rel.Schema) {
			return nil, errorf(sql.CodeInternal, "scan column #%d is outside stream %s", c, rel.Name)
		}
		if c == rel.EventTime {
			src.EventTime = i
		}
	}
	b.stage = &chainStage{ID: 0, Source: src}
	b.row = scan.Schema()
	b.srcCols = append([]int(nil), scan.Columns...)
	b.timeIdx = src.EventTime

	for _, node := range chain[1:] {
		if err := b.add(node, rel); err != nil {
			return nil, err
		}
	}
	p := &Physical{}
	for _, cs := range b.stages {
		p.Stages = append(p.Stages, Chain(cs.ID, cs.Source, cs.Sink, cs.Pipeline...))
	}
	return p, nil
}

// chainStage is a stage being built: one input, operators in order.
type chainStage struct {
	ID       int
	Source   SourceSpec
	Pipeline []Node
	Sink     SinkSpec
}

// flatten returns the nodes of a linear plan from its Scan up to its Sink.
func flatten(l LogicalNode) ([]LogicalNode, error) {
	var out []LogicalNode
	for n := l; n != nil; {
		out = append(out, n)
		ch := n.Children()
		switch len(ch) {
		case 0:
			n = nil
		case 1:
			n = ch[0]
		default:
			return nil, errorf(sql.CodeNotSupported, "plans with more than one input (%s)", n)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if _, ok := out[0].(*Scan); !ok {
		return nil, errorf(sql.CodeInternal, "plan does not start with a Scan but %s", out[0])
	}
	if _, ok := out[len(out)-1].(*Sink); !ok {
		return nil, errorf(sql.CodeInternal, "plan does not end with a Sink but %s", out[len(out)-1])
	}
	return out, nil
}

// builder accumulates stages while walking the chain upward.
type builder struct {
	opts   Options
	stages []*chainStage
	stage  *chainStage
	row    sql.Schema // layout of the rows entering the next node
	// srcCols maps a position of the current row to its column in the scanned stream, while
	// the row is still a subset of the stream's columns (nil after a projection/aggregate).
	srcCols []int
	// timeIdx is the position of the stream's event-time column in the current row, or -1.
	timeIdx int
	// keyPos are the positions of the current row that hold group keys (after an aggregate).
	keyPos     map[int]bool
	aggregated bool
}

func (b *builder) add(node LogicalNode, rel *sql.Relation) error {
	switch n := node.(type) {
	case *Filter:
		f, err := compile(n.Pred, "filter")
		if err != nil {
			return err
		}
		b.stage.Pipeline = append(b.stage.Pipeline, &FilterNode{Pred: f, Text: n.Pred.String()})

	case *Project:
		p := &ProjectNode{Exprs: make([]Evaluator, len(n.Exprs)), Schema: n.Schema(), Texts: make([]string, len(n.Exprs))}
		keyPos := map[int]bool{}
		for i, e := range n.Exprs {
			f, err := compile(e, "select list")
			if err != nil {
				return err
			}
			p.Exprs[i], p.Texts[i] = f, aliased(e, n.Names[i])
			if c, ok := e.(*sql.ColumnRef); ok && b.keyPos[c.Index] {
				keyPos[i] = true
			}
		}
		b.stage.Pipeline = append(b.stage.Pipeline, p)
		b.row, b.srcCols, b.timeIdx, b.keyPos = p.Schema, nil, -1, keyPos

	case *WindowAssign:
		if n.Window.Kind == sql.WindowSession {
			return errorf(sql.CodeNotSupported, "SESSION windows need an aggregation (GROUP BY)")
		}
		w := windowSpec(n.Window)
		b.stage.Pipeline = append(b.stage.Pipeline, &WindowAssignNode{Window: w, Schema: n.Schema()})
		b.row = n.Schema()

	case *Aggregate:
		if b.aggregated {
			return errorf(sql.CodeNotSupported, "more than one aggregation in a query")
		}
		b.aggregated = true
		if needsExchange(rel, n, b.srcCols) {
			var err error
			if n, err = b.exchange(n, rel); err != nil {
				return err
			}
		}
		a, err := aggregateNode(n)
		if err != nil {
			return err
		}
		b.stage.Pipeline = append(b.stage.Pipeline, a)
		b.row, b.srcCols, b.timeIdx = a.Schema, nil, -1
		b.keyPos = map[int]bool{}
		for i := range a.Keys {
			b.keyPos[i] = true
		}
		if a.Window.Kind != WindowNone {
			b.keyPos[len(a.Keys)], b.keyPos[len(a.Keys)+1] = true, true
		}

	case *Limit:
		if n.N < 0 {
			return errorf(sql.CodeInvalidValue, "LIMIT %d is negative", n.N)
		}
		b.stage.Pipeline = append(b.stage.Pipeline, &LimitNode{N: n.N})

	case *Sink:
		s := b.opts.Sink
		if s.Stream == "" {
			s.Stream = n.Stream
		}
		if len(s.Schema) == 0 {
			s.Schema = n.Schema()
		} else if len(s.Schema) != len(b.row) {
			return errorf(sql.CodeTypeMismatch, "the query gives %d columns but %s has %d", len(b.row), s.Stream, len(s.Schema))
		}
		s.KeyColumns = nil
		for i := range b.row {
			if b.keyPos[i] {
				s.KeyColumns = append(s.KeyColumns, i)
			}
		}
		b.stage.Sink = s
		b.stages = append(b.stages, b.stage)
		b.stage = nil

	default:
		return errorf(sql.CodeInternal, "unexpected %T inside a plan", node)
	}
	return nil
}

// exchange ends the current stage with a projection of the columns agg reads and an
// ExchangeNode, starts the next stage on the shuffle topic, and returns agg rewritten over
// the shuffled row.
func (b *builder) exchange(agg *Aggregate, rel *sql.Relation) (*Aggregate, error) {
	used := map[int]bool{}
	addUsed(used, agg.Keys...)
	for _, g := range agg.Aggs {
		addUsed(used, g.Arg)
	}
	if agg.Window != nil {
		used[agg.Window.TimeCol] = true
		if b.timeIdx >= 0 {
			used[b.timeIdx] = true
		}
	}
	cols := make([]int, 0, len(used))
	for c := range used {
		cols = append(cols, c)
	}
	sort.Ints(cols)
	m := make([]int, len(b.row))
	for i := range m {
		m[i] = -1
	}
	for j, c := range cols {
		if c < 0 || c >= len(b.row) {
			return nil, errorf(sql.CodeInternal, "aggregate reads column #%d of a %d-column row", c, len(b.row))
		}
		m[c] = j
	}
	shuffled := make(sql.Schema, len(cols))
	for j, c := range cols {
		shuffled[j] = b.row[c]
	}
	if len(cols) != len(b.row) {
		p := &ProjectNode{Exprs: make([]Evaluator, len(cols)), Schema: shuffled, Texts: make([]string, len(cols))}
		for j, c := range cols {
			ref := &sql.ColumnRef{Index: c, Name: b.row[c].Name, T: b.row[c].Type}
			f, err := compile(ref, "exchange projection")
			if err != nil {
				return nil, err
			}
			p.Exprs[j], p.Texts[j] = f, ref.Name
		}
		b.stage.Pipeline = append(b.stage.Pipeline, p)
	}
	// agg over the shuffled row.
	na := &Aggregate{Input: agg.Input, Emit: agg.Emit, Aggs: append([]sql.AggCall(nil), agg.Aggs...)}
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
		na.Window = &w
	}
	topic := ShuffleTopic(b.opts.Job, b.stage.ID)
	x := &ExchangeNode{Topic: topic, Keys: make([]Evaluator, len(na.Keys)), Texts: make([]string, len(na.Keys))}
	for i, k := range na.Keys {
		f, err := compile(k, "exchange key")
		if err != nil {
			return nil, err
		}
		x.Keys[i], x.Texts[i] = f, k.String()
	}
	srcOpts := map[string]string{"topic": topic}
	if len(na.Keys) == 0 {
		x.Queues = 1
		srcOpts["queues"] = "1"
	}
	b.stage.Pipeline = append(b.stage.Pipeline, x)
	b.stages = append(b.stages, b.stage)

	next := &chainStage{ID: b.stage.ID + 1, Source: SourceSpec{
		Stream:         topic,
		Connector:      ShuffleConnector,
		Options:        srcOpts,
		Schema:         shuffled,
		Columns:        make([]int, len(cols)),
		EventTime:      -1,
		WatermarkDelay: rel.WatermarkDelay,
		FromStage:      b.stage.ID,
	}}
	for j := range cols {
		next.Source.Columns[j] = j
	}
	if agg.Window != nil && b.timeIdx >= 0 {
		next.Source.EventTime = m[b.timeIdx]
	}
	b.stage = next
	b.row = shuffled
	b.srcCols = nil
	b.timeIdx = next.Source.EventTime
	return na, nil
}

// needsExchange reports whether agg, reading rows whose columns come from rel (srcCols maps
// row positions to rel's columns, nil when unknown), must be preceded by an exchange.
func needsExchange(rel *sql.Relation, agg *Aggregate, srcCols []int) bool {
	if singleSplit(rel) {
		return false
	}
	if len(agg.Keys) == 0 || srcCols == nil {
		return true
	}
	part := partitionColumns(rel)
	if len(part) == 0 {
		return true
	}
	keyCols := map[int]bool{}
	for _, k := range agg.Keys {
		if c, ok := k.(*sql.ColumnRef); ok && c.Index >= 0 && c.Index < len(srcCols) {
			keyCols[srcCols[c.Index]] = true
		}
	}
	for _, p := range part {
		if !keyCols[p] {
			return true
		}
	}
	return false
}

// singleSplit reports whether rel is read as exactly one split: a file, or a topic declared
// with queues = 1.
func singleSplit(rel *sql.Relation) bool {
	if rel.Connector() == "file" {
		return true
	}
	if q, ok := rel.Options["queues"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(q))
		return err == nil && n == 1
	}
	return false
}

// partitionColumns returns the columns of rel named by its partitioned_by (or key) option:
// the columns its producer keys records by, so equal values share a queue. Nil when the
// option is absent or names an unknown column.
func partitionColumns(rel *sql.Relation) []int {
	v := rel.Options["partitioned_by"]
	if v == "" {
		v = rel.Options["key"]
	}
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []int
	for _, name := range strings.Split(v, ",") {
		i := rel.Schema.Index(strings.TrimSpace(name))
		if i < 0 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

func compile(e sql.Expr, where string) (Evaluator, error) {
	f, err := sql.Compile(e)
	if err != nil {
		return nil, wrapf(err, "compiling %s %s", where, e)
	}
	return f, nil
}

func windowSpec(w sql.Window) WindowSpec {
	s := WindowSpec{Time: w.TimeCol, Size: w.Size, Slide: w.Slide, Gap: w.Gap}
	switch w.Kind {
	case sql.WindowTumble:
		s.Kind = WindowTumble
	case sql.WindowHop:
		s.Kind = WindowHop
	case sql.WindowSession:
		s.Kind = WindowSession
	}
	return s
}

func aggregateNode(n *Aggregate) (*AggregateNode, error) {
	a := &AggregateNode{
		Keys:     make([]Evaluator, len(n.Keys)),
		KeyTypes: make([]sql.Type, len(n.Keys)),
		Texts:    make([]string, len(n.Keys)),
		Aggs:     make([]AggSpec, len(n.Aggs)),
		Emit:     n.Emit,
		Schema:   n.Schema(),
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
	for i, g := range n.Aggs {
		spec, err := aggSpec(g)
		if err != nil {
			return nil, err
		}
		a.Aggs[i] = spec
	}
	return a, nil
}

func aggSpec(g sql.AggCall) (AggSpec, error) {
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
	for _, a := range g.Args() {
		ev, err := compile(a, "aggregate argument")
		if err != nil {
			return AggSpec{}, err
		}
		s.Args = append(s.Args, ev)
		s.ArgTypes = append(s.ArgTypes, a.Type())
	}
	return s, nil
}
