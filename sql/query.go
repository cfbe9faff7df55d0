package sql

// Expr is a bound scalar expression tree: names resolved to column indexes, types known.
// Trees are immutable; rewrites build new nodes with WithChildren. Compile turns a tree
// into a closure evaluated once per row.
type Expr interface {
	Type() Type
	// String renders the expression as SQL text (for EXPLAIN and error messages).
	String() string
	Children() []Expr
	WithChildren(children []Expr) Expr
}

// ColumnRef reads column Index of the input row.
type ColumnRef struct {
	Index int
	Name  string
	T     Type
}

func (c *ColumnRef) Type() Type                 { return c.T }
func (c *ColumnRef) String() string             { return c.Name }
func (c *ColumnRef) Children() []Expr           { return nil }
func (c *ColumnRef) WithChildren(_ []Expr) Expr { return c }

// Catalog is what binding needs to know about declared streams and views.
type Catalog interface {
	// Relation returns the stream or materialized view named name (case-insensitive).
	Relation(name string) (*Relation, bool)
}

// Relation is a stream or a materialized view as the binder sees it.
type Relation struct {
	Name    string
	Schema  Schema
	IsView  bool
	Options map[string]string // WITH options, lower-case keys (connector, topic, format, ...)
	// EventTime is the index of the WATERMARK FOR column, or -1 (processing time).
	EventTime int
	// WatermarkDelay is the declared delay in milliseconds.
	WatermarkDelay int64
}

// Connector returns the relation's connector option (default "broker").
func (r *Relation) Connector() string {
	if c := r.Options["connector"]; c != "" {
		return c
	}
	return "broker"
}

// WindowKind is the window of a query, an aggregation or a window assignment. The planner
// and the runtime use the same values.
type WindowKind uint8

const (
	// WindowNone: no window (a plain GROUP BY).
	WindowNone WindowKind = iota
	WindowTumble
	WindowHop
	WindowSession
	// WindowGiven: the rows already carry their window in two TIMESTAMP columns (the
	// window_start and window_end of a window table function or of an inner windowed
	// aggregation); the window closes when the watermark passes its end.
	WindowGiven
)

// Window is the window a query groups or assigns by. Sizes are milliseconds.
type Window struct {
	Kind    WindowKind
	TimeCol int // index in the source schema (WindowGiven: of window_start)
	EndCol  int // WindowGiven: index of window_end
	Size    int64
	Slide   int64
	Gap     int64
	// TVF is true for the table-valued form FROM TUMBLE(s, ts, size); false for the
	// group-by form GROUP BY TUMBLE(ts, size).
	TVF bool
}

// EmitMode is the EMIT clause, and when an aggregation emits.
type EmitMode uint8

const (
	EmitDefault EmitMode = iota // windows: on close; plain GROUP BY: changes
	// EmitChanges emits an updated row on every change.
	EmitChanges
	// EmitOnClose emits each window once, when the watermark passes its end (without a
	// window: once, when the input ends).
	EmitOnClose
)

func (m EmitMode) String() string {
	switch m {
	case EmitChanges:
		return "changes"
	case EmitOnClose:
		return "on-close"
	}
	return "default"
}

// AggCall is one aggregate call of a query.
type AggCall struct {
	Func     string // the aggregate's name: COUNT, SUM, AVG, MIN, MAX, or a user aggregate's
	Star     bool   // COUNT(*)
	Distinct bool   // COUNT(DISTINCT x)
	// Arg is over the input row: nil for COUNT(*), the argument, or an *ArgList of the
	// arguments of an aggregate that takes several (Args lists them either way).
	Arg Expr
	T   Type    // result type
	Def *AggDef // the aggregate (nil: the built-in called Func; see Aggregate)
}

// Query is a bound SELECT.
//
// Row layouts:
//   - the input row is the source schema, plus window_start and window_end (TIMESTAMP) at the
//     end when Window is a table-valued TUMBLE or HOP;
//   - when Aggregated, the aggregate row is GroupBy values, then window_start and window_end
//     when Window != nil, then one value per Aggs entry.
//
// Where and GroupBy and Aggs[i].Arg are over the input row; Having and Select are over the
// aggregate row when Aggregated, else over the input row.
type Query struct {
	From       *Relation
	Window     *Window
	Where      Expr
	GroupBy    []Expr
	Aggregated bool
	Aggs       []AggCall
	Having     Expr
	Select     []Expr
	Names      []string // output column names, one per Select
	Emit       EmitMode
	Limit      int64 // -1 when absent
	Text       string
}

// IsConstant reports whether the query has no FROM: it computes one row from constants.
func (q *Query) IsConstant() bool { return q.From != nil && q.From.Name == "" }

// OutputSchema returns the query's result columns.
func (q *Query) OutputSchema() Schema {
	s := make(Schema, len(q.Select))
	for i, e := range q.Select {
		s[i] = Column{Name: q.Names[i], Type: e.Type()}
	}
	return s
}
