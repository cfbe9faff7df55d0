package sql

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Statement is one parsed statement. The concrete types are *CreateStream, *CreateView,
// *CreateFunction, *Insert, *Select, *ShowStmt, *ShowVar, *Describe, *Explain, *Drop, *JobControl, *SetStmt,
// *Transaction, *CreateUser, *AlterUser and *DropUser; front ends switch on them.
type Statement interface {
	// Source returns the statement's own text (without the ending ';') and its byte
	// offset in the text given to Parse.
	Source() (text string, pos int)
}

// Src is the text and offset of a statement, embedded in every statement type.
type Src struct {
	Text string
	Pos  int
}

// Source implements Statement.
func (s Src) Source() (string, int) { return s.Text, s.Pos }

// CreateStream is CREATE [OR REPLACE] STREAM [IF NOT EXISTS] name [(columns...,
// WATERMARK FOR c AS c - INTERVAL ...)] [WITH (k = v, ...)] [AS SELECT ...].
//
// A source stream has Columns and no As; a derived stream has As and no Columns (its
// schema is the query's output). WatermarkColumn is "" when no WATERMARK clause was given.
// OrReplace and IfNotExists are never both set.
type CreateStream struct {
	Src
	Name            string
	IfNotExists     bool
	OrReplace       bool
	Columns         Schema
	WatermarkColumn string
	WatermarkDelay  int64             // milliseconds
	Options         map[string]string // lower-case keys, unquoted values
	As              *Select
	// Table is CREATE TABLE: a versioned table (a changelog of versions by PrimaryKey) or,
	// with a lookup connector, a table read by key.
	Table      bool
	PrimaryKey []string
}

// CreateView is CREATE [OR REPLACE] MATERIALIZED VIEW [IF NOT EXISTS] name [WITH (...)]
// AS SELECT .... OrReplace and IfNotExists are never both set.
type CreateView struct {
	Src
	Name        string
	IfNotExists bool
	OrReplace   bool
	Options     map[string]string
	As          *Select
}

// CreateFunction is CREATE [OR REPLACE] FUNCTION | AGGREGATE [IF NOT EXISTS] name(param
// TYPE, ...) RETURNS TYPE [LANGUAGE sql | javascript | wasm] AS 'body' [WITH (k = v, ...)]
// (the clauses after RETURNS in any order; the body may be dollar-quoted: $$ ... $$).
// Language is lower case, "sql" when not given ("js" is given as "javascript", "webassembly"
// as "wasm"). BodyPos is the byte offset of the body's first character in the text given to
// Parse (exact for a dollar-quoted body). OrReplace and IfNotExists are never both set.
type CreateFunction struct {
	Src
	Name        string
	Aggregate   bool
	OrReplace   bool
	IfNotExists bool
	Params      Schema
	Returns     Type
	// Table, for RETURNS TABLE (c TYPE, ...): the columns of a table function's rows
	// (Returns is then unset).
	Table    Schema
	Language string
	Body     string
	BodyPos  int
	Options  map[string]string // lower-case keys, unquoted values; never nil

	input string // the whole text given to Parse, for positions (BodyError)
}

// Insert is INSERT INTO target [(columns)] SELECT ... or ... VALUES (...), ....
// Exactly one of Query and Values is set. Values holds constant expressions (bound, no
// column references); Rows converts them to the target's schema.
type Insert struct {
	Src
	Target  string
	Columns []string // nil when no column list was given
	Query   *Select
	Values  [][]Expr
}

// ShowStmt is SHOW STREAMS | VIEWS | JOBS | UNITS | TOPICS | FUNCTIONS | USERS; What is the
// noun (its String is the upper-case word).
type ShowStmt struct {
	Src
	What ShowWhat
}

// ShowVar is SHOW name (a session setting); Name is lower case. SHOW ALL gives "all".
type ShowVar struct {
	Src
	Name string
}

// Describe is DESCRIBE name (also DESC name); Function is set for DESCRIBE FUNCTION name
// (also DESCRIBE AGGREGATE name).
type Describe struct {
	Src
	Name     string
	Function bool
}

// Explain is EXPLAIN <statement>. Statement is the explained statement (*Select,
// *CreateStream with As, *CreateView or *Insert with Query); Query is its SELECT.
type Explain struct {
	Src
	Statement Statement
	Query     *Select
}

// Drop is DROP STREAM | TABLE | VIEW | FUNCTION | AGGREGATE [IF EXISTS] name. Kind is
// DropStream, DropTable, DropView (DROP MATERIALIZED VIEW gives DropView), DropFunction or
// DropAggregate. A function's name
// may be followed by its parameter types, (type, ...), which are checked for syntax only
// (function names are not overloaded).
type Drop struct {
	Src
	Kind     DropKind
	Name     string
	IfExists bool
}

// JobControl is PAUSE JOB id, RESUME JOB id or TERMINATE JOB id. Action is JobPause,
// JobResume or JobTerminate; ID is the id as written (quotes removed).
type JobControl struct {
	Src
	Action JobAction
	ID     string
}

// SetStmt is SET name = value (or SET name TO value). Name is lower case; Value is the
// value unquoted.
type SetStmt struct {
	Src
	Name  string
	Value string
}

// Transaction is BEGIN, START TRANSACTION, COMMIT, END, ROLLBACK or ABORT (with their
// optional WORK/TRANSACTION noise words and BEGIN's transaction modes). rsql has no
// transactions; front ends accept these so that drivers which send them work. Action is
// TxBegin (also START TRANSACTION), TxCommit (also END) or TxRollback (also ABORT).
type Transaction struct {
	Src
	Action TxAction
}

// CreateUser is CREATE USER name [WITH] [PASSWORD 'secret'] [ADMIN | READ ONLY] (SUPERUSER
// and NOSUPERUSER are accepted for ADMIN and READ ONLY). Password is nil when no PASSWORD
// was given; Role is "admin", "read_only", or "" when not given.
type CreateUser struct {
	Src
	Name     string
	Password *string
	Role     string
}

// AlterUser is ALTER USER name [WITH] [PASSWORD 'secret'] [ADMIN | READ ONLY]: the fields
// as CreateUser's; what is not given is left as it is.
type AlterUser struct {
	Src
	Name     string
	Password *string
	Role     string
}

// DropUser is DROP USER [IF EXISTS] name.
type DropUser struct {
	Src
	Name     string
	IfExists bool
}

// Select is a parsed, unbound SELECT. Bind resolves it against a catalog.
type Select struct {
	Src
	// From is the name of the relation read (the stream of a window table function).
	From string
	// Emit is the EMIT clause (EmitDefault when absent).
	Emit EmitMode
	// Params are the values of $n / ? parameters given to ParseParams.
	Params []Value

	stmt    ast.ResultSetNode // *ast.SelectStmt or *ast.SetOprStmt
	rw      *rewrite
	input   string // the whole text given to Parse, for positions
	tvfs    []*windowCall
	tfns    []*tableCall
	syntax  []streamSyntax
	emitPos int
}

// tableCall is a table function call of FROM (JOIN LATERAL f(...) or JOIN UNNEST(...)) as
// the pre-pass found it: the function's name and where, and the alias with its column
// names (nil: none given).
type tableCall struct {
	name    string
	pos     int
	alias   string
	cols    []string
	colsPos int
	// ordinality: WITH ORDINALITY, a last column numbering the call's rows from 1.
	ordinality bool
}

// windowCall is a window table function of FROM, as the pre-pass found it: over the
// relation named source, or over the subquery between tokens subOpen and subClose.
type windowCall struct {
	source            string
	subOpen, subClose int
	alias             string
	kind              WindowKind
	timeCol           string
	timePos           int
	size              int64
	slide             int64
	gap               int64
	pos               int
}
