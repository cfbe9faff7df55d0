package planner

import (
	"rsql/connectors/options"
	"rsql/sql"
)

// Evaluator is a compiled scalar expression: evaluated once per row, no boxing.
type Evaluator = func(sql.Row) sql.Value

// WindowKind and EmitMode are the sql package's: one set of values from binding to
// execution.
type (
	WindowKind = sql.WindowKind
	EmitMode   = sql.EmitMode
)

const (
	WindowNone    = sql.WindowNone
	WindowTumble  = sql.WindowTumble
	WindowHop     = sql.WindowHop
	WindowSession = sql.WindowSession
	WindowGiven   = sql.WindowGiven

	// EmitOnClose emits each window once, when the watermark passes its end.
	EmitOnClose = sql.EmitOnClose
	// EmitChanges emits an updated row on every change.
	EmitChanges = sql.EmitChanges
)

// WindowSpec is the window of a windowed aggregation or assignment. Sizes are milliseconds.
type WindowSpec struct {
	Kind  WindowKind
	Time  int   // index of the event-time column in the operator's input row
	Size  int64 // tumble and hop
	Slide int64 // hop
	Gap   int64 // session
	// End is the index of the window_end column for WindowGiven (Time is window_start's).
	End int
}

// AggSpec is one aggregate call: Func runs it (built by the aggregate's registration,
// sql.AggDef.New, one per compiled plan), Args evaluate its arguments over the input row
// (none for COUNT(*)). Type is the result type (docs/sql.md, "Aggregates").
type AggSpec struct {
	Func     sql.Aggregator
	Args     []Evaluator
	ArgTypes []sql.Type
	Type     sql.Type
	Text     string // for EXPLAIN, e.g. "SUM(amount)"
	// MayFail is set for aggregates whose Add can fail a row (user aggregates).
	MayFail bool
}

// Node is one physical operator of a stage's pipeline, in order from source to sink.
// The node types below are the whole set; exec.Build maps each to an operator.
type Node interface{ physicalNode() }

// FilterNode drops rows for which Pred is not TRUE.
type FilterNode struct {
	Pred Evaluator
	Text string
	// Memo holds the values of the subexpressions Pred has in common with itself or with
	// the ProjectNode right after it (sql.CompileShared): the operator begins it for each
	// batch, sets its row and moves the rows it keeps. Nil when nothing is shared.
	Memo *sql.Memo
}

// ProjectNode computes Exprs over each row; its output schema is Schema.
type ProjectNode struct {
	Exprs  []Evaluator
	Schema sql.Schema
	Texts  []string
	// Memo: as FilterNode's. AfterFilter: it is the memo of the FilterNode right before,
	// which begins each batch (the projection reads its rows' values at their new indexes).
	Memo        *sql.Memo
	AfterFilter bool
	// Identity: every expression is its input's column of the same position, and there
	// are as many as the input has (a SELECT list that only renames an aggregation's
	// columns): the operator may pass a batch on as it is.
	Identity bool
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
	// TTL, for an aggregation without window, drops a group whose last row is older than
	// TTL milliseconds behind the watermark (0: groups are kept for ever). A group that
	// comes back after that starts again from nothing.
	TTL int64
	// EmitNew, for an aggregation without aggregates (SELECT DISTINCT), emits a group's row
	// once, when the group is created, instead of on every change.
	EmitNew bool
	// Changes: an aggregation without window that emits changes writes the change column
	// after its row (Schema's last column): Upsert, each change as the group's new row;
	// Retract, the group's old row as a delete before its new row. A group whose last row
	// was taken back is deleted. AppendOnly: no change column.
	Changes ChangeMode
	// Retracting: the input is updating, its change column the input row's last: a delete
	// takes its row back from its group (docs/sql.md, "Changelogs").
	Retracting bool
	// Families lists the families of COUNT(DISTINCT) calls (indexes into Aggs, at least two,
	// at most sql.MaxFamilyMembers): the calls of one family count the values of one column,
	// unfiltered (COUNT(DISTINCT x)) or filtered (COUNT(DISTINCT CASE WHEN p THEN x END)),
	// so an operator may keep each value once with the marks of the calls that counted it
	// (sql.NewDistinctFamily). Every call also computes its result on its own: an operator
	// may ignore Families.
	Families [][]int
	// Conds: the conditions of the arguments (of every aggregate, in order) that are CASE
	// WHEN p THEN ... END, each computed once per row; the operator calls Conds.Eval with
	// each row before it evaluates the arguments (sql.CompileConds). Nil when none is.
	Conds *sql.Conds
	// FamilyShapes, when Conds is set: per family of Families, its members' argument shapes
	// when every member's argument is the family's column, unfiltered (Cond -1) or the
	// THEN of a CASE without ELSE whose condition is Conds' Cond (nil otherwise), so the
	// operator may read the column and the conditions instead of the arguments.
	FamilyShapes [][]sql.CaseShape
	// KeysHashed: the aggregation is the first operator of a stage whose rows an exchange
	// on its keys (the same expressions, none volatile) delivers, so the hash the exchange
	// computed of a row's keys is the aggregation's (exec.Batch.Hashes, when the exchange
	// runs in the process).
	KeysHashed bool
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

// LimitNode skips Offset rows, then lets N through and stops the job (N < 0: no limit).
type LimitNode struct{ N, Offset int64 }

// SortSpec is one compiled sort key (nulls sort last ascending, first descending).
type SortSpec struct {
	Eval       Evaluator
	Desc       bool
	NullsFirst bool // nulls before every value (by default: when Desc)
}

// TopNMode is the logical TopN's.

// TopNNode keeps the first N rows of each partition in Order and numbers them into column
// RowNumber (see the logical TopN for the modes). Rows with equal Partition values share a
// split (the planner exchanges on them).
type TopNNode struct {
	Partition []Evaluator
	Order     []SortSpec
	N         int64
	RowNumber int
	Mode      TopNMode
	WindowEnd int
	Time      int
	TTL       int64
	Latest    bool // among rows equal in Order, the one read last first
	// Changes, Retracting: as the logical TopN's (TopNChanges: the output row ends with
	// the change column; a retracting input's change column is its row's last).
	Changes        ChangeMode
	Retracting     bool
	AtSource       bool // TableVersions: its input holds truncations (sql.OpTruncate)
	Schema         sql.Schema
	PartitionTexts []string
	OrderTexts     []string
}

// JoinNode joins its two inputs (input 0 the left side, 1 the right), exchanged on their
// keys so that equal keys meet in one split; see the logical Join for the modes and
// fields. Keys are compiled over each side's row, Residual over the joined row (the left's
// LeftWidth columns, then the right's).
type JoinNode struct {
	Kind                 sql.JoinKind
	Mode                 JoinMode
	LeftKeys, RightKeys  []Evaluator
	Residual             Evaluator
	LeftTime, RightTime  int
	Lower, Upper         int64
	LowerOpen, UpperOpen bool
	// HasUntil: a left row lives until the watermark passes its column LeftUntil (the
	// logical Join's).
	HasUntil          bool
	LeftUntil         int
	LeftEnd, RightEnd int
	AsOf, RightOp     int
	TTL               int64
	// Dominance: the window join may drop rows of one side that can no longer match.
	Dominance *JoinDominance
	// LeftWidth and RightWidth are the columns each side gives the joined row; a side with
	// changes (a retract input) has one more, its change column, last. Changes is the mode
	// of the join's rows: when not append-only they end with a change column.
	LeftWidth, RightWidth     int
	LeftChanges, RightChanges bool
	Changes                   ChangeMode
	// RightTable: a regular join's right side is a table, of which each key (the join key,
	// its primary key) has one row, its latest version: a row replaces the key's row, a
	// delete (RightOp) removes it.
	RightTable bool
	// LeftTable: the same of the left side, its change column LeftOp.
	LeftTable bool
	LeftOp    int
	Schema    sql.Schema
	Text      string // the logical Join's description, for EXPLAIN
}

// OverNode computes aggregates over a window of rows (see the logical Over): per partition
// (rows with equal Partition values share a split: the planner exchanges on them) the rows
// in Order, each call's value over the Preceding rows before a row and the row written into
// column Cols[i]. Bounded: every row is emitted once, with its values, when the input ends;
// otherwise Changes is Retract and the output row ends with the change column (a retracting
// input's change column is its row's last).
type OverNode struct {
	Partition  []Evaluator
	Order      []SortSpec
	Preceding  int64
	Aggs       []AggSpec
	Cols       []int
	Bounded    bool
	Changes    ChangeMode
	Retracting bool
	Schema     sql.Schema
	Text       string // the logical Over's description, for EXPLAIN
}

// SortNode emits its bounded input's rows in order when the input ends (one split).
type SortNode struct {
	Keys  []SortSpec
	Texts []string
	// Changes is the mode of an updating input, whose changes the sort applies before it
	// emits the final rows without the change column (Key: an upsert input's key); Schema
	// is then its output row.
	Changes ChangeMode
	Key     []int
	Schema  sql.Schema
}

// UnionNode passes the rows of all its inputs through (UNION ALL); the inputs' rows have
// the same layout, Schema.
type UnionNode struct {
	Schema sql.Schema
}

func (*FilterNode) physicalNode()       {}
func (*ProjectNode) physicalNode()      {}
func (*WindowAssignNode) physicalNode() {}
func (*AggregateNode) physicalNode()    {}
func (*ExchangeNode) physicalNode()     {}
func (*LimitNode) physicalNode()        {}
func (*UnionNode) physicalNode()        {}
func (*TopNNode) physicalNode()         {}
func (*SortNode) physicalNode()         {}
func (*OverNode) physicalNode()         {}
func (*JoinNode) physicalNode()         {}

// SourceSpec is one input of a stage: a declared stream, or the edge from an upstream stage
// (FromStage >= 0) whose exchange routes rows to this stage's queues.
type SourceSpec struct {
	Stream    string                // stream name, or the shuffle topic name for exchanges
	Connector string                // "file", "broker", ...
	Options   options.StreamOptions // the stream's WITH options, parsed when planned (Raw: as given)
	Schema    sql.Schema            // the stream's full schema (what the decoder produces)
	// Columns are the indexes of Schema the stage reads, after projection pruning; rows
	// entering the stage from this input hold exactly these columns, in this order.
	Columns []int
	// EventTime is the index (in the pruned row) of the event-time column, or -1 for
	// processing time; WatermarkDelay is the declared delay in milliseconds. Edges carry
	// their upstream stage's watermark instead.
	EventTime      int
	WatermarkDelay int64
	// FromStage is the upstream stage id when this input is an edge, else -1.
	FromStage int
	// PrimaryKey is a table's key (indexes of Schema): a message with a key and an empty
	// body is a tombstone, the delete of that key (docs/sql.md, "Tables").
	PrimaryKey []int
}

// SinkSpec is where a stage's final rows go: a stream's topic/file, or the client (push
// query, Stream == "").
type SinkSpec struct {
	Stream    string
	Connector string
	// Options are the stream's WITH options, parsed when the statement is planned (Raw:
	// as given, for SHOW CREATE and the catalog).
	Options options.StreamOptions
	Schema  sql.Schema
	// DLQOf, on a dead-letter output, names the stream whose bad records it takes.
	DLQOf string
	// KeyColumns are the output columns that form the message key (the group key), if any.
	KeyColumns []int
	// Changes is how the rows change: for an updating query the row's last column is the
	// change column (NULL: the key's new row, "delete": the key's row is deleted) and
	// KeyColumns the changelog's key (docs/sql.md, "Changelogs").
	Changes ChangeMode
}

// StreamSink is the sink of a declared stream named stream with the WITH options raw and
// the given schema: the options are parsed here, once (options.Of); Connector is the
// connector as given ("" when the options name none).
func StreamSink(stream string, raw map[string]string, schema sql.Schema) (SinkSpec, error) {
	o, err := options.Of(raw)
	if err != nil {
		return SinkSpec{}, errorf(sql.CodeInvalidValue, "stream %s: %v", stream, err)
	}
	return SinkSpec{Stream: stream, Connector: raw["connector"], Options: o, Schema: schema}, nil
}

// Port names where rows come from inside a stage: the output of operator Op of the stage
// (Op >= 0), or stage input Input (Op < 0).
type Port struct {
	Op    int
	Input int
}

// FromOp is the port of operator i's output; FromInput the port of stage input i.
func FromOp(i int) Port    { return Port{Op: i, Input: -1} }
func FromInput(i int) Port { return Port{Op: -1, Input: i} }

// Op is one operator of a stage with the ports its inputs come from, in input order (the
// input index an operator sees is the position in Inputs).
type Op struct {
	Node   Node
	Inputs []Port
}

// Stage is inputs → a DAG of operators → one output. Ops are in topological order (an
// operator's inputs are stage inputs or operators before it); Out is the port the output
// reads. The output is the Exchange to a downstream stage when Exchange is set, else Sink.
//
// The stage's splits are its inputs' splits: a stream input's splits are its source's,
// an edge's are the queues of its exchange. When every input is an edge the inputs share
// the queue numbering (they were exchanged with the same queue count, so equal keys meet in
// one split); a stage with several stream inputs names each split "<input>:<split>".
type Stage struct {
	ID       int
	Inputs   []SourceSpec
	Ops      []Op
	Out      Port
	Exchange *ExchangeNode
	Sink     SinkSpec
}

// Source returns the stage's first input (the only one of a chain).
func (s *Stage) Source() SourceSpec { return s.Inputs[0] }

// Nodes returns the stage's operator nodes in topological order, then its exchange if any.
func (s *Stage) Nodes() []Node {
	out := make([]Node, 0, len(s.Ops)+1)
	for _, op := range s.Ops {
		out = append(out, op.Node)
	}
	if s.Exchange != nil {
		out = append(out, s.Exchange)
	}
	return out
}

// Chain builds a one-input stage whose operators run one after the other: src → nodes →
// sink. A final *ExchangeNode among nodes becomes the stage's exchange (sink is then
// ignored).
func Chain(id int, src SourceSpec, sink SinkSpec, nodes ...Node) *Stage {
	st := &Stage{ID: id, Inputs: []SourceSpec{src}, Out: FromInput(0), Sink: sink}
	for _, n := range nodes {
		if x, ok := n.(*ExchangeNode); ok {
			st.Exchange = x
			st.Sink = SinkSpec{}
			continue
		}
		st.Ops = append(st.Ops, Op{Node: n, Inputs: []Port{st.Out}})
		st.Out = FromOp(len(st.Ops) - 1)
	}
	return st
}

// Physical is the physical plan of one continuous query: stages in upstream-first order
// (every edge goes from a stage to a later one); the last stage writes the query's sink.
type Physical struct {
	Stages []*Stage
}

// Stage returns the stage with the given id, or nil.
func (p *Physical) Stage(id int) *Stage {
	for _, s := range p.Stages {
		if s.ID == id {
			return s
		}
	}
	return nil
}
