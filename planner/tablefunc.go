package planner

import (
	"strings"

	"rsql/sql"
)

// TableFunc calls a table function once per input row (JOIN LATERAL f(args), JOIN UNNEST):
// one output row per row the call gives, the input row's columns then Cols. Outer keeps
// an input row its call gives no rows for, with NULLs for Cols. Args are over the input
// row. It keeps no state, so it runs where its input runs (no exchange).
type TableFunc struct {
	Input LogicalNode
	Func  *sql.TableFuncDef
	Args  []sql.Expr
	Cols  sql.Schema
	Outer bool
	// Ordinality: the last of Cols numbers each call's rows from 1 (WITH ORDINALITY).
	Ordinality bool
	Name       string // the alias, for EXPLAIN
}

func (t *TableFunc) Schema() sql.Schema {
	in := t.Input.Schema()
	return append(append(make(sql.Schema, 0, len(in)+len(t.Cols)), in...), t.Cols...)
}
func (t *TableFunc) Children() []LogicalNode { return []LogicalNode{t.Input} }
func (t *TableFunc) WithChildren(c []LogicalNode) LogicalNode {
	n := *t
	n.Input = c[0]
	return &n
}
func (t *TableFunc) String() string {
	return "TableFunc " + tableFuncText(t.Func, t.Args, t.Cols, t.Name, t.Outer, t.Ordinality)
}

func tableFuncText(f *sql.TableFuncDef, args []sql.Expr, cols sql.Schema, name string, outer, ordinality bool) string {
	as := make([]string, len(args))
	for i, a := range args {
		as[i] = a.String()
	}
	cs := make([]string, len(cols))
	for i, c := range cols {
		cs[i] = c.Name + " " + c.Type.String()
	}
	s := strings.ToLower(f.Name) + "(" + strings.Join(as, ", ") + ")"
	if ordinality {
		s += " WITH ORDINALITY"
	}
	s += " AS " + name + "(" + strings.Join(cs, ", ") + ")"
	if outer {
		s += " outer"
	}
	return s
}

// TableFuncNode is the physical TableFunc: Args evaluated over each input row, Func's
// evaluator built from them, Schema the input row then the function's columns.
type TableFuncNode struct {
	Func   sql.TableEvaluator
	Outer  bool
	NCols  int
	Schema sql.Schema
	Text   string
	Name   string // the function's name, for errors
	// Deterministic: a call gives the same rows for the same row every time (a built-in;
	// user functions may not), so a replay gives the rows of each input row again in the
	// same order.
	Deterministic bool
}

func (*TableFuncNode) physicalNode() {}

func (n *TableFuncNode) explain(sql.Schema) ([]string, sql.Schema) {
	return []string{"TableFunc", n.Text}, n.Schema
}

// tableFuncNode compiles a TableFunc.
func tableFuncNode(t *TableFunc) (*TableFuncNode, error) {
	args := make([]Evaluator, len(t.Args))
	for i, a := range t.Args {
		f, err := compile(a, "table function arguments")
		if err != nil {
			return nil, err
		}
		args[i] = f
	}
	ev, err := t.Func.Build(args)
	if err != nil {
		return nil, wrapf(err, "table function %s", strings.ToLower(t.Func.Name))
	}
	if t.Ordinality {
		ev = sql.WithOrdinality(ev, len(t.Cols)-1)
	}
	return &TableFuncNode{Func: ev, Outer: t.Outer, NCols: len(t.Cols), Schema: t.Schema(),
		Text: tableFuncText(t.Func, t.Args, t.Cols, t.Name, t.Outer, t.Ordinality), Name: strings.ToLower(t.Func.Name),
		Deterministic: builtinTableFunc(t.Func)}, nil
}

func builtinTableFunc(f *sql.TableFuncDef) bool {
	d, ok := sql.LookupTableFunc(f.Name)
	return ok && d == f
}
