package planner

import "rsql/sql"

// Evaluator is a compiled scalar expression: evaluated once per row, no boxing.
type Evaluator = func(sql.Row) sql.Value

// WindowKind selects the window assignment of a windowed aggregation.
type WindowKind uint8

const (
	WindowNone WindowKind = iota
	WindowTumble
	WindowHop
	WindowSession
)

func (k WindowKind) String() string {
	return [...]string{"none", "tumble", "hop", "session"}[k]
}

// WindowSpec is the window of a windowed aggregation or assignment. Sizes are milliseconds.
type WindowSpec struct {
	Kind  WindowKind
	Time  int   // index of the event-time column in the operator's input row
	Size  int64 // tumble and hop
	Slide int64 // hop
	Gap   int64 // session
}

// AggKind is an aggregate function.
type AggKind uint8

const (
	AggCountStar AggKind = iota
	AggCount
	AggCountDistinct
	AggSum
	AggAvg
	AggMin
	AggMax
)

func (k AggKind) String() string {
	return [...]string{"COUNT(*)", "COUNT", "COUNT(DISTINCT)", "SUM", "AVG", "MIN", "MAX"}[k]
}

// AggSpec is one aggregate call: Arg is nil for COUNT(*). Type is the result type
// (COUNT: BIGINT; SUM of integers: BIGINT, of DOUBLE: DOUBLE, of DECIMAL: DECIMAL with the
// argument's scale; AVG: DOUBLE; MIN/MAX: the argument's type).
type AggSpec struct {
	Kind    AggKind
	Arg     Evaluator
	ArgType sql.Type
	Type    sql.Type
	Text    string // for EXPLAIN, e.g. "SUM(amount)"
}

// EmitMode says when an aggregation emits.
type EmitMode uint8

const (
	// EmitOnClose emits each window once, when the watermark passes its end.
	EmitOnClose EmitMode = iota
	// EmitChanges emits an updated row on every change.
	EmitChanges
)

// Node is one physical operator of a stage's pipeline, in order from source to sink.
// The node types below are the whole set; exec.Build maps each to an operator.
type Node interface{ physicalNode() }

// FilterNode drops rows for which Pred is not TRUE.
type FilterNode struct {
	Pred Evaluator
	Text string
}

// ProjectNode computes Exprs over each row; its output schema is Schema.
type ProjectNode struct {
	Exprs  []Evaluator
	Schema sql.Schema
	Texts  []string
}

// WindowAssignNode appends window_start and window_end (TIMESTAMP) to each row: one output
// row per window the row falls in (tumble: one, hop: size/slide). Used when a table-valued
// window is selected from without aggregation. Session windows need aggregation.
type WindowAssignNode struct {
	Window WindowSpec
	Schema sql.Schema // input columns + window_start, window_end
}

// AggregateNode groups rows by Keys (and by window when Window.Kind != WindowNone) and
// computes Aggs. Its output row is: the key values, then window_start and window_end when
// windowed, then the aggregate results, in that order (Schema describes it).
// Windowed: emits per Emit (default EmitOnClose). Not windowed: emits changes.
// Late rows (their every window already closed) are counted and sent to the late output.
type AggregateNode struct {
	Window   WindowSpec
	Keys     []Evaluator
	KeyTypes []sql.Type
	Aggs     []AggSpec
	Emit     EmitMode
	Schema   sql.Schema
	Texts    []string // key texts, for EXPLAIN
}

// ExchangeNode ends a stage: rows are written to the shuffle topic of the stage, queue =
// hash(Keys) mod queues, and the next stage reads that topic.
type ExchangeNode struct {
	Topic string
	Keys  []Evaluator
	Texts []string
	// Queues is the number of queues of the shuffle topic the plan needs: 1 when the
	// downstream stage must see every row in one split (a global aggregate, no Keys), or 0
	// for the topic's default.
	Queues int
}

// LimitNode stops the pipeline after N rows (push queries).
type LimitNode struct{ N int64 }

func (*FilterNode) physicalNode()       {}
func (*ProjectNode) physicalNode()      {}
func (*WindowAssignNode) physicalNode() {}
func (*AggregateNode) physicalNode()    {}
func (*ExchangeNode) physicalNode()     {}
func (*LimitNode) physicalNode()        {}

// SourceSpec is where a stage reads: a declared stream or the shuffle topic of an upstream
// stage.
type SourceSpec struct {
	Stream    string            // stream name, or the shuffle topic name for exchanges
	Connector string            // "file", "broker", ...
	Options   map[string]string // the stream's WITH options (lower-case keys)
	Schema    sql.Schema        // the stream's full schema (what the decoder produces)
	// Columns are the indexes of Schema the stage reads, after projection pruning; rows
	// entering the pipeline hold exactly these columns, in this order.
	Columns []int
	// EventTime is the index (in the pruned row) of the event-time column, or -1 for
	// processing time; WatermarkDelay is the declared delay in milliseconds.
	EventTime      int
	WatermarkDelay int64
	// FromStage is the upstream stage id when this source is an exchange, else -1.
	FromStage int
}

// SinkSpec is where a stage's final rows go: a stream's topic/file, or the client (push
// query, Stream == "").
type SinkSpec struct {
	Stream    string
	Connector string
	Options   map[string]string
	Schema    sql.Schema
	// KeyColumns are the output columns that form the message key (the group key), if any.
	KeyColumns []int
}

// Stage is one pipeline: a source, operators in order, and a sink (or an exchange as its
// last node, in which case Sink is zero).
type Stage struct {
	ID       int
	Source   SourceSpec
	Pipeline []Node
	Sink     SinkSpec
}

// Physical is the physical plan of one continuous query: stages in upstream-first order.
type Physical struct {
	Stages []*Stage
}
