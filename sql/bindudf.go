package sql

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// FuncCatalog is implemented by a Catalog that holds user-defined functions (CREATE
// FUNCTION, CREATE AGGREGATE). The binder asks it for a called name it does not find among
// the built-in functions and aggregates, so a user function never shadows a built-in.
type FuncCatalog interface {
	// Function returns the user-defined scalar function called name (case-insensitive).
	// A FuncDef with Inline set (a SQL function) is replaced by its body at binding.
	Function(name string) (*FuncDef, bool)
	// Aggregate returns the user-defined aggregate called name (case-insensitive).
	Aggregate(name string) (*AggDef, bool)
}

// lookupAgg finds the aggregate called name: a built-in, else a user aggregate.
func (b *binder) lookupAgg(name string) (*AggDef, bool) {
	if d, ok := LookupAgg(name); ok {
		return d, true
	}
	if b.ctx == nil { // INSERT ... VALUES binds constants, without a catalog
		return nil, false
	}
	if fc, ok := b.ctx.cat.(FuncCatalog); ok {
		return fc.Aggregate(name)
	}
	return nil, false
}

// userFunc finds the user-defined scalar function called name.
func (b *binder) userFunc(name string) (*FuncDef, bool) {
	if b.ctx == nil { // INSERT ... VALUES binds constants, without a catalog
		return nil, false
	}
	if fc, ok := b.ctx.cat.(FuncCatalog); ok {
		return fc.Function(name)
	}
	return nil, false
}

// userCall types a call of user function d: its Check converts the arguments to the
// parameter types (42883 when they do not convert); a SQL function is inlined.
func (b *binder) userCall(d *FuncDef, args []Expr) (Expr, error) {
	t, args, err := d.Check(args)
	if err != nil {
		return nil, b.at(err)
	}
	if d.Inline != nil {
		e, err := d.Inline(args)
		if err != nil {
			return nil, b.at(err)
		}
		return e, nil
	}
	return &Call{Func: d.Name, Args: args, T: t, Def: d}, nil
}

// markUserAggs turns the calls of user aggregates in a parsed statement into aggregate
// calls (the grammar parses an unknown name as a scalar function), so that binding sees
// them where it looks for aggregates.
func markUserAggs(n ast.Node, cat Catalog) {
	fc, ok := cat.(FuncCatalog)
	if !ok || n == nil {
		return
	}
	n.Accept(&aggMarker{fc: fc})
}

type aggMarker struct{ fc FuncCatalog }

func (v *aggMarker) Enter(n ast.Node) (ast.Node, bool) { return n, false }

func (v *aggMarker) Leave(n ast.Node) (ast.Node, bool) {
	f, ok := n.(*ast.FuncCallExpr)
	if !ok || strings.HasPrefix(f.FnName.L, "__rsql_") {
		return n, true
	}
	if d, builtin := lookupName(f.FnName.L); builtin && !d.Unlisted {
		return n, true
	}
	if _, ok := v.fc.Aggregate(f.FnName.O); !ok {
		return n, true
	}
	a := &ast.AggregateFuncExpr{F: f.FnName.O, Args: f.Args}
	a.SetOriginTextPosition(f.OriginTextPosition())
	a.SetText(nil, f.Text())
	return a, true
}
