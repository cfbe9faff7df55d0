package sql

import "strings"

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

// ChangeColumn is the hidden last column of a versioned table: "delete" in a record ends
// its key's current version (docs/sql.md, "Joins").
const ChangeColumn = "__op"

// OpDelete is the change column's value of a delete (docs/sql.md, "Changelogs"); an insert's
// is NULL.
var OpDelete = Varchar("delete")

// OpTruncate is the change column's value of a truncation of a table read from its source's
// changes (postgres-cdc): every row of the table is deleted. Only the operator keeping the
// table's latest versions right above such a source reads it (planner.TopNNode
// TableVersions), which turns it into the deletes of the rows it holds; nothing else sees it.
var OpTruncate = Varchar("truncate")

// IsTruncate reports whether a change column's value v is OpTruncate.
func IsTruncate(v Value) bool {
	return v.K == KindVarchar && v.S == "truncate"
}

// IsDelete reports whether a change column's value v is a delete: "delete" or "d", in any
// case.
func IsDelete(v Value) bool {
	return v.K == KindVarchar && (len(v.S) == 6 || len(v.S) == 1) && (strings.EqualFold(v.S, "delete") || strings.EqualFold(v.S, "d"))
}

// Relation is a stream, a table or a materialized view as the binder sees it.
type Relation struct {
	Name   string
	Schema Schema
	IsView bool
	// IsTable: a table (CREATE TABLE): versions of rows by PrimaryKey (column indexes).
	IsTable    bool
	PrimaryKey []int
	Options    map[string]string // WITH options, lower-case keys (connector, topic, format, ...)
	// EventTime is the index of the WATERMARK FOR column, or -1 (processing time).
	EventTime int
	// WatermarkDelay is the declared delay in milliseconds.
	WatermarkDelay int64
}

// Bounded reports whether reading the relation ends: a file, a view's current rows, the
// constant row of a query without FROM.
func (r *Relation) Bounded() bool {
	switch r.Connector() {
	case "file", "values":
		return true
	}
	return r.IsView
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
	// id numbers the window in its statement (ColAttr.Window).
	id int
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

// Query is a bound SELECT block.
//
// Row layouts:
//   - the input row is the FROM's row (From.Schema), plus window_start and window_end
//     (TIMESTAMP) at the end when Window is a table-valued TUMBLE or HOP;
//   - when Aggregated, the aggregate row is GroupBy values, then window_start and window_end
//     when Window != nil, then one value per Aggs entry. (For a WindowGiven window the
//     GroupBy keys holding window_start and window_end are the window, not keys.)
//
// Where and GroupBy and Aggs[i].Arg are over the input row; Having, Select and the
// RowNumber's expressions are over the aggregate row when Aggregated, else over the input
// row. OrderBy is over the output row (Select).
type Query struct {
	From       From
	Window     *Window
	Where      Expr
	GroupBy    []Expr
	Aggregated bool
	Aggs       []AggCall
	Having     Expr
	Select     []Expr
	Names      []string // output column names, one per Select
	// Attrs says, per output column, whether it is an event-time attribute or a window
	// bound (see ColAttr).
	Attrs []ColAttr
	// Distinct is SELECT DISTINCT.
	Distinct bool
	// RowNumber is the ROW_NUMBER() OVER (...) of the select list, if any.
	RowNumber *RowNumber
	// Over is the aggregates over a window of rows (AVG(x) OVER (...)) of the select
	// list, if any.
	Over    *Over
	OrderBy []SortKey
	// Hidden counts the last Select entries that only ORDER BY reads (an expression not in
	// the select list); Bind returns such a query wrapped in one that drops them.
	Hidden int
	Emit   EmitMode
	Limit  int64 // -1 when absent
	Offset int64
	Text   string
}

// From is the bound FROM of a query.
type From interface {
	// Schema is the row the FROM produces.
	Schema() Schema
	isFrom()
}

// FromRelation reads a declared stream, table or materialized view.
type FromRelation struct {
	Rel *Relation
}

// FromQuery reads the rows of a derived table or of a common table expression.
type FromQuery struct {
	Query *Query
	Name  string // the alias, or the CTE's name
}

// FromUnion is UNION ALL of queries with the same number of columns; Types are the
// columns' types (each input's are cast to them when they differ) and the names are the
// first input's.
type FromUnion struct {
	Inputs []*Query
	Types  []Type
}

// FromNothing is the FROM of a query without FROM: one empty row.
type FromNothing struct{}

// JoinKind is the kind of a join.
type JoinKind uint8

const (
	JoinInner JoinKind = iota
	JoinLeft
	JoinRight
	JoinFull
)

func (k JoinKind) String() string {
	return [...]string{"inner", "left", "right", "full"}[k]
}

// FromJoin joins two relations; its row is Left's columns, then Right's. On is over that
// row. AsOf is the time expression of FOR SYSTEM_TIME AS OF (over the joined row, reading
// the left side), nil without. LeftAttrs and RightAttrs are each side's column attributes.
type FromJoin struct {
	Left, Right           From
	Kind                  JoinKind
	On                    Expr
	AsOf                  Expr
	LeftName, RightName   string
	LeftAttrs, RightAttrs []ColAttr
}

// FromLateral calls a table function once per row of Input (JOIN LATERAL f(args) AS
// t(c, ...), JOIN UNNEST(...)); its row is Input's columns, then the function's Cols
// (named by the alias's column list). Args are over Input's row. Outer (LEFT JOIN
// LATERAL ... ON TRUE) keeps an input row its call gives no rows for, with NULLs.
// Ordinality (WITH ORDINALITY): the last of Cols numbers a call's rows from 1.
type FromLateral struct {
	Input      From
	Func       *TableFuncDef
	Args       []Expr
	Cols       Schema
	Outer      bool
	Ordinality bool
	Name       string // the alias
	InputAttrs []ColAttr
}

func (f *FromLateral) Schema() Schema {
	in := f.Input.Schema()
	out := make(Schema, 0, len(in)+len(f.Cols))
	return append(append(out, in...), f.Cols...)
}
func (*FromLateral) isFrom() {}

func (f *FromRelation) Schema() Schema { return f.Rel.Schema }
func (f *FromQuery) Schema() Schema    { return f.Query.OutputSchema() }
func (f *FromUnion) Schema() Schema {
	names := f.Inputs[0].Names
	s := make(Schema, len(f.Types))
	for i, t := range f.Types {
		s[i] = Column{Name: names[i], Type: t}
	}
	return s
}
func (*FromNothing) Schema() Schema { return nil }
func (f *FromJoin) Schema() Schema {
	l, r := f.Left.Schema(), f.Right.Schema()
	out := make(Schema, 0, len(l)+len(r))
	return append(append(out, l...), r...)
}

func (*FromRelation) isFrom() {}
func (*FromQuery) isFrom()    {}
func (*FromUnion) isFrom()    {}
func (*FromNothing) isFrom()  {}
func (*FromJoin) isFrom()     {}

// ColAttr describes what a column means for time. Time: it is an event-time attribute —
// the stream's WATERMARK FOR column passed through, or the window_end of a windowed
// aggregation — so its values are in order up to the watermark and it may drive windows.
// Window > 0 marks the window_start (End false) or window_end (End true) of window number
// Window of the statement: an aggregation grouped by both bounds of one window is over
// that window (chained aggregation).
type ColAttr struct {
	Time   bool
	Window int
	End    bool
}

// RowNumber is ROW_NUMBER() OVER (PARTITION BY Partition ORDER BY Order) at output column
// Col. A query with one is only valid as the derived table of a query that filters it
// (rn <= N, rn < N, rn = 1): window Top-N or deduplication.
type RowNumber struct {
	Col       int
	Partition []Expr
	Order     []SortKey
	// PartAttrs and OrderAttrs are the ColAttr of each Partition and Order expression.
	PartAttrs, OrderAttrs []ColAttr
}

// PartitionAttr is the ColAttr of partition key i.
func (r *RowNumber) PartitionAttr(i int) ColAttr {
	if i < len(r.PartAttrs) {
		return r.PartAttrs[i]
	}
	return ColAttr{}
}

// OrderAttr is the ColAttr of order key i.
func (r *RowNumber) OrderAttr(i int) ColAttr {
	if i < len(r.OrderAttrs) {
		return r.OrderAttrs[i]
	}
	return ColAttr{}
}

// Over is the window aggregates of a select list: AGG(x) OVER (PARTITION BY Partition ORDER
// BY Order ROWS BETWEEN Preceding PRECEDING AND CURRENT ROW), one window shared by every
// call. Each call's value goes to output column Calls[i].Col (whose select expression is a
// NULL placeholder); Partition, Order and the calls' arguments are over the input row (a
// query with window aggregates does not aggregate otherwise). docs/sql.md, "Window
// aggregates".
type Over struct {
	Partition []Expr
	Order     []SortKey
	Preceding int64
	Calls     []OverCall
	// Text is the window as written, for errors and EXPLAIN.
	Text string
}

// OverCall is one aggregate over the window, at output column Col.
type OverCall struct {
	Col int
	Agg AggCall
}

// SortKey is one ORDER BY item. By default nulls sort as larger than every value
// (PostgreSQL: last ascending, first descending); NULLS FIRST/LAST says otherwise.
type SortKey struct {
	Expr  Expr
	Desc  bool
	Nulls NullsOrder
}

// NullsOrder is an ORDER BY item's NULLS FIRST or NULLS LAST, or neither.
type NullsOrder uint8

const (
	NullsDefault NullsOrder = iota // last ascending, first descending
	NullsFirst
	NullsLast
)

// NullsFirst reports whether the key puts nulls before every value.
func (k SortKey) NullsFirst() bool {
	switch k.Nulls {
	case NullsFirst:
		return true
	case NullsLast:
		return false
	}
	return k.Desc
}

// IsConstant reports whether the query has no FROM: it computes one row from constants.
func (q *Query) IsConstant() bool {
	_, ok := q.From.(*FromNothing)
	return ok
}

// Relations returns every declared relation the query reads, each once, in the order
// they appear.
func (q *Query) Relations() []*Relation {
	var out []*Relation
	seen := map[*Relation]bool{}
	var walk func(q *Query)
	walk = func(q *Query) {
		switch f := q.From.(type) {
		case *FromRelation:
			if !seen[f.Rel] {
				seen[f.Rel] = true
				out = append(out, f.Rel)
			}
		case *FromQuery:
			walk(f.Query)
		case *FromUnion:
			for _, in := range f.Inputs {
				walk(in)
			}
		case *FromJoin:
			walkFrom(f.Left, walk, seen, &out)
			walkFrom(f.Right, walk, seen, &out)
		case *FromLateral:
			walkFrom(f.Input, walk, seen, &out)
		}
	}
	walk(q)
	return out
}

// walkFrom visits the relations of one side of a join.
func walkFrom(f From, walk func(*Query), seen map[*Relation]bool, out *[]*Relation) {
	switch f := f.(type) {
	case *FromRelation:
		if !seen[f.Rel] {
			seen[f.Rel] = true
			*out = append(*out, f.Rel)
		}
	case *FromQuery:
		walk(f.Query)
	case *FromUnion:
		for _, in := range f.Inputs {
			walk(in)
		}
	case *FromJoin:
		walkFrom(f.Left, walk, seen, out)
		walkFrom(f.Right, walk, seen, out)
	case *FromLateral:
		walkFrom(f.Input, walk, seen, out)
	}
}

// View returns the materialized view the query reads, when it reads exactly one relation
// and that is a view.
func (q *Query) View() (*Relation, bool) {
	rels := q.Relations()
	if len(rels) == 1 && rels[0].IsView {
		return rels[0], true
	}
	return nil, false
}

// OutputSchema returns the query's result columns.
func (q *Query) OutputSchema() Schema {
	s := make(Schema, len(q.Select))
	for i, e := range q.Select {
		s[i] = Column{Name: q.Names[i], Type: e.Type()}
	}
	return s
}
