package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"rsql/sql"
	"rsql/udf"
)

// User-defined functions (docs/sql.md, "Functions"): CREATE FUNCTION / CREATE AGGREGATE
// check the function (udf.Runtime.Check) and store it in the catalog — a wasm module's
// bytes included — so every instance sees it; statements bind against a stmtCatalog,
// which finds them after the built-ins and records which ones a job calls, and DROP and
// OR REPLACE refuse while a running job calls one.

// maxNesting bounds how deeply SQL functions inline into each other.
const maxNesting = 32

// stmtCatalog is the catalog as one statement binds against it. It is used by the
// binding goroutine only.
type stmtCatalog struct {
	e     *Engine
	used  map[string]string // lower-case name -> name
	depth int
}

func (e *Engine) stmtCatalog() *stmtCatalog { return &stmtCatalog{e: e, used: map[string]string{}} }

// Relation implements sql.Catalog.
func (c *stmtCatalog) Relation(name string) (*sql.Relation, bool) { return c.e.cat.Relation(name) }

// Function implements sql.FuncCatalog.
func (c *stmtCatalog) Function(name string) (*sql.FuncDef, bool) {
	d, ok := c.e.cat.Function(name)
	if !ok || d.Aggregate || d.Table != nil {
		return nil, false
	}
	c.used[key(d.Name)] = d.Name
	fd, err := c.e.udf.Func(d.Spec(), c)
	if err != nil {
		return failingFunc(d.Name, err), true
	}
	return fd, true
}

// Aggregate implements sql.FuncCatalog.
func (c *stmtCatalog) Aggregate(name string) (*sql.AggDef, bool) {
	d, ok := c.e.cat.Function(name)
	if !ok || !d.Aggregate {
		return nil, false
	}
	c.used[key(d.Name)] = d.Name
	ad, err := c.e.udf.Agg(d.Spec())
	if err != nil {
		return &sql.AggDef{Name: d.Name, User: true,
			Check: func([]sql.Expr, bool) (sql.Type, []sql.Expr, error) { return sql.TypeNull, nil, err }}, true
	}
	return ad, true
}

// TableFunction implements sql.TableFuncCatalog.
func (c *stmtCatalog) TableFunction(name string) (*sql.TableFuncDef, bool) {
	d, ok := c.e.cat.Function(name)
	if !ok || d.Table == nil {
		return nil, false
	}
	c.used[key(d.Name)] = d.Name
	td, err := c.e.udf.TableFunc(d.Spec())
	if err != nil {
		return &sql.TableFuncDef{Name: d.Name,
			Check: func([]sql.Expr) (sql.Schema, []sql.Expr, error) { return nil, nil, err }}, true
	}
	return td, true
}

// failingFunc stands for a stored function that no longer compiles: calls of it fail to
// bind with the reason.
func failingFunc(name string, err error) *sql.FuncDef {
	return &sql.FuncDef{Name: name, Hidden: true,
		Check: func([]sql.Expr) (sql.Type, []sql.Expr, error) { return sql.TypeNull, nil, err }}
}

// Nest implements udf.Nester.
func (c *stmtCatalog) Nest(fn string) (func(), error) {
	if c.depth >= maxNesting {
		return nil, sql.Errorf(sql.CodeTooComplex, "SQL functions nest more than %d deep at %s: does it call itself?", maxNesting, fn)
	}
	c.depth++
	return func() { c.depth-- }, nil
}

// usedFunctions returns the user functions the statement called, sorted.
func (c *stmtCatalog) usedFunctions() []string {
	out := make([]string, 0, len(c.used))
	for _, n := range c.used {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (e *Engine) createFunction(s *sql.CreateFunction) (*Result, error) {
	tag, what := "CREATE FUNCTION", "function"
	if s.Aggregate {
		tag, what = "CREATE AGGREGATE", "aggregate"
	}
	if old, exists := e.cat.Function(s.Name); exists {
		if s.IfNotExists {
			return &Result{Tag: tag, Notice: &Notice{Severity: "NOTICE", Code: sql.CodeDuplicateFunction,
				Message: fmt.Sprintf("%s %q already exists, skipping", what, old.Name)}}, nil
		}
		if !s.OrReplace {
			return nil, sql.Errorf(sql.CodeDuplicateFunction, "%s %q already exists (CREATE OR REPLACE replaces it, IF NOT EXISTS keeps it)", what, old.Name)
		}
		if old.Aggregate != s.Aggregate || (old.Table != nil) != (s.Table != nil) {
			return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is %s: DROP it first", old.Name, map[string]string{"aggregate": "an aggregate", "scalar": "a scalar function", "table": "a table function"}[functionKind(old)])
		}
	}
	d := FunctionDef{Name: s.Name, Aggregate: s.Aggregate, Params: columnDefs(s.Params), Returns: columnDefs(sql.Schema{{Type: s.Returns}})[0],
		Language: s.Language, Body: s.Body, Options: s.Options, Statement: s.Text}
	if s.Table != nil {
		d.Returns, d.Table = ColumnDef{}, columnDefs(s.Table)
	}
	if len(d.Options) == 0 {
		d.Options = nil
	}
	if s.Language == udf.LangWasm {
		mod, err := e.readModule(s.Body)
		if err != nil {
			return nil, err
		}
		d.Module = mod
	}
	cat := e.stmtCatalog()
	if err := e.udf.Check(d.Spec(), cat); err != nil {
		return nil, s.BodyError(err)
	}
	for _, n := range cat.usedFunctions() {
		if strings.EqualFold(n, s.Name) {
			return nil, sql.Errorf(sql.CodeNotSupported, "SQL function %s cannot call itself", s.Name)
		}
	}
	if err := e.cat.AddFunction(d, s.OrReplace); err != nil {
		return nil, err
	}
	return &Result{Tag: tag}, nil
}

// readModule reads a wasm module named in CREATE FUNCTION, through the file sandbox
// (relative paths start at its first root), at most udf.MaxModuleSize bytes.
func (e *Engine) readModule(path string) ([]byte, error) {
	b, err := e.files.ReadFile(path, udf.MaxModuleSize)
	if err != nil {
		return nil, sql.Errorf(sql.CodeInvalidValue, "wasm module %q: %v", path, err)
	}
	return b, nil
}

func (e *Engine) dropFunction(s *sql.Drop) (*Result, error) {
	tag := "DROP " + s.Kind.String()
	d, ok := e.cat.Function(s.Name)
	if !ok {
		if s.IfExists {
			return &Result{Tag: tag}, nil
		}
		return nil, sql.Errorf(sql.CodeUndefinedFunction, "%s %q does not exist", strings.ToLower(s.Kind.String()), s.Name)
	}
	if d.Aggregate != (s.Kind == sql.DropAggregate) {
		if d.Aggregate {
			return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is an aggregate: use DROP AGGREGATE", d.Name)
		}
		return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is not an aggregate: use DROP FUNCTION", d.Name)
	}
	if err := e.cat.DropFunction(d.Name); err != nil {
		return nil, err
	}
	return &Result{Tag: tag}, nil
}

var functionColumns = sql.Schema{{Name: "name", Type: sql.TypeVarchar}, {Name: "kind", Type: sql.TypeVarchar},
	{Name: "language", Type: sql.TypeVarchar}, {Name: "signature", Type: sql.TypeVarchar}}

// showFunctions lists the built-in functions and aggregates, then the user's.
func (e *Engine) showFunctions() *Result {
	var rows []sql.Row
	for _, d := range sql.Funcs() {
		if !d.Hidden && !d.Unlisted {
			rows = append(rows, sql.Row{sql.Varchar(strings.ToLower(d.Name)), sql.Varchar("scalar"), sql.Varchar("built-in"), sql.Varchar(d.Sig)})
		}
	}
	for _, d := range sql.Aggs() {
		rows = append(rows, sql.Row{sql.Varchar(strings.ToLower(d.Name)), sql.Varchar("aggregate"), sql.Varchar("built-in"), sql.Varchar(d.Sig)})
	}
	for _, d := range sql.TableFuncs() {
		rows = append(rows, sql.Row{sql.Varchar(strings.ToLower(d.Name)), sql.Varchar("table"), sql.Varchar("built-in"), sql.Varchar(d.Sig)})
	}
	for _, d := range e.cat.Functions() {
		rows = append(rows, sql.Row{sql.Varchar(d.Name), sql.Varchar(functionKind(d)), sql.Varchar(d.Language), sql.Varchar(d.Spec().Signature())})
	}
	return &Result{Columns: functionColumns, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}
}

func functionKind(d FunctionDef) string {
	if d.Aggregate {
		return "aggregate"
	}
	if d.Table != nil {
		return "table"
	}
	return "scalar"
}

// describeFunction shows one function as property/value rows.
func (e *Engine) describeFunction(s *sql.Describe) (*Result, error) {
	cols := sql.Schema{{Name: "property", Type: sql.TypeVarchar}, {Name: "value", Type: sql.TypeVarchar}}
	var rows []sql.Row
	add := func(k, v string) { rows = append(rows, sql.Row{sql.Varchar(k), sql.Varchar(v)}) }
	if d, ok := e.cat.Function(s.Name); ok {
		spec := d.Spec()
		add("name", d.Name)
		add("kind", functionKind(d))
		add("language", d.Language)
		add("signature", spec.Signature())
		switch d.Language {
		case udf.LangWasm:
			sum := sha256.Sum256(d.Module)
			add("module", fmt.Sprintf("%s (%d bytes, sha256 %s)", d.Body, len(d.Module), hex.EncodeToString(sum[:])))
		default:
			add("body", d.Body)
		}
		keys := make([]string, 0, len(d.Options))
		for k := range d.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add("option "+k, d.Options[k])
		}
		var users []string
		for _, j := range e.cat.Jobs() {
			for _, f := range j.Functions {
				if j.live() && strings.EqualFold(f, d.Name) {
					users = append(users, j.ID)
				}
			}
		}
		if len(users) > 0 {
			add("used by", strings.Join(users, ", "))
		}
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "DESCRIBE"}, nil
	}
	if d, ok := sql.LookupFunc(s.Name); ok && !d.Hidden && !d.Unlisted {
		add("name", strings.ToLower(d.Name))
		add("kind", "scalar")
		add("language", "built-in")
		add("signature", d.Sig)
		add("notes", d.Doc)
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "DESCRIBE"}, nil
	}
	if d, ok := sql.LookupTableFunc(s.Name); ok {
		add("name", strings.ToLower(d.Name))
		add("kind", "table")
		add("language", "built-in")
		add("signature", d.Sig)
		add("notes", d.Doc)
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "DESCRIBE"}, nil
	}
	if d, ok := sql.LookupAgg(s.Name); ok {
		add("name", strings.ToLower(d.Name))
		add("kind", "aggregate")
		add("language", "built-in")
		add("signature", d.Sig)
		add("result", d.Doc)
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "DESCRIBE"}, nil
	}
	return nil, sql.Errorf(sql.CodeUndefinedFunction, "function %q does not exist (SHOW FUNCTIONS lists them)", s.Name)
}
