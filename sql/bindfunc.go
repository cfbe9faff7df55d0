package sql

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// streamSyntaxCall binds a placeholder call of the pre-pass by what its entry says it
// stands for.
func (b *binder) streamSyntaxCall(f *ast.FuncCallExpr, syn *streamSyntax) (Expr, error) {
	switch syn.kind {
	case synInterval:
		return NewLiteral(Interval(syn.ms)), nil
	case synParam:
		n := syn.param
		if n < 1 || n > len(b.params) {
			return nil, b.errf(CodeUndefinedParameter, "there is no value for parameter $%d", n)
		}
		return NewLiteral(b.params[n-1]), nil
	case synTimestamp:
		a, err := b.expr(f.Args[0])
		if err != nil {
			return nil, err
		}
		b.setPos(f)
		v, err := Eval(a, nil)
		if err != nil {
			return nil, b.at(err)
		}
		tv, err := CastValue(v, TypeTimestamp)
		if err != nil {
			return nil, b.at(err)
		}
		return NewLiteral(tv), nil
	case synCast:
		if len(f.Args) != 1 {
			return nil, b.errf(CodeSyntax, "CAST takes one value: CAST(x AS type)")
		}
		a, err := b.expr(f.Args[0])
		if err != nil {
			return nil, err
		}
		b.setPos(f)
		t := syn.typ
		if t.Kind == KindInterval || a.Type().Kind == KindInterval {
			return nil, b.errf(CodeTypeMismatch, "cannot CAST %s to %s", a.Type(), t)
		}
		if l, ok := a.(*Literal); ok {
			v, err := CastValue(l.V, t)
			if err != nil {
				return nil, b.at(err)
			}
			return &Literal{V: v, T: t}, nil
		}
		return &Cast{Arg: a, T: t}, nil
	case synWindow:
		wn, _ := windowUsage(syn.window)
		return nil, b.errf(CodeSyntax, "%s(...) belongs in GROUP BY or, with a stream argument, in FROM", wn)
	case synExtract, synJSONGet, synConcat, synRegexpCI:
		args, err := b.exprs(f.Args)
		if err != nil {
			return nil, err
		}
		b.setPos(f)
		switch syn.kind {
		case synRegexpCI:
			return nil, b.errf(CodeSyntax, "~* needs a pattern on its right")
		case synExtract:
			return b.call("EXTRACT", args...)
		case synConcat:
			return b.call("CONCAT", args...)
		case synJSONGet:
			if syn.text {
				return b.call("JSON_GET_TEXT", args...)
			}
			return b.call("JSON_GET", args...)
		}
	}
	// A FULL JOIN or AS OF marker off the leftmost path of its ON (x XOR y): the marker's
	// former name keeps the message as it was.
	marker := "__rsql_full"
	if syn.kind == synAsOf {
		marker = "__rsql_asof"
	}
	return nil, b.errf(CodeUndefinedFunction, "function %s does not exist", marker)
}

func (b *binder) funcCall(f *ast.FuncCallExpr) (Expr, error) {
	if syn := syntaxOf(b.syntax, f); syn != nil {
		return b.streamSyntaxCall(f, syn)
	}
	fn := strings.ToUpper(f.FnName.L)
	d, ok := lookupName(f.FnName.L)
	if ok && d.Bind != nil {
		e, err := d.Bind(b, f)
		if e != nil || err != nil {
			return e, err
		}
	}
	if !ok || d.Hidden || d.Unlisted {
		return b.unknownCall(f)
	}
	if d.Name == "NOW" {
		return b.call("NOW")
	}
	args, err := b.exprs(f.Args)
	if err != nil {
		return nil, err
	}
	b.setPos(f)
	return b.call(fn, args...)
}

// unknownCall binds a call of a name that is no built-in function: a user function's, else
// 42883.
func (b *binder) unknownCall(f *ast.FuncCallExpr) (Expr, error) {
	if ud, ok := b.userFunc(f.FnName.O); ok {
		args, err := b.exprs(f.Args)
		if err != nil {
			return nil, err
		}
		b.setPos(f)
		return b.userCall(ud, args)
	}
	return nil, b.errf(CodeUndefinedFunction, "function %s does not exist", strings.ToLower(f.FnName.O))
}

// trim binds TRIM([BOTH|LEADING|TRAILING] [remstr] FROM s) and TRIM(s).
func (b *binder) trim(f *ast.FuncCallExpr) (Expr, error) {
	if len(f.Args) == 0 {
		return nil, b.errf(CodeSyntax, "TRIM needs an argument")
	}
	fn := "TRIM"
	var args []Expr
	for i, a := range f.Args {
		if a == nil {
			continue
		}
		if d, ok := a.(*ast.TrimDirectionExpr); ok {
			switch d.Direction {
			case ast.TrimLeading:
				fn = "LTRIM"
			case ast.TrimTrailing:
				fn = "RTRIM"
			}
			continue
		}
		if v, ok := a.(*driver.ValueExpr); ok && i == 1 && v.Kind() == driver.KindNull && v.OriginTextPosition() == 0 {
			continue // no remstr given
		}
		e, err := b.expr(a)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	b.setPos(f)
	return b.call(fn, args...)
}

// windowBound binds TUMBLE_START(ts, size) and friends to the window columns of the
// aggregate row.
func (b *binder) windowBound(f *ast.FuncCallExpr) (Expr, error) {
	name := strings.ToUpper(f.FnName.L)
	kind := windowKindOf(f.FnName.L)
	wn, want := windowUsage(kind)
	if b.mode != modeAgg || b.inAgg || b.window == nil {
		return nil, b.errf(CodeGrouping, "%s needs GROUP BY %s(...)", name, wn)
	}
	if b.window.Kind != kind {
		return nil, b.errf(CodeTypeMismatch, "%s does not match the window of GROUP BY", name)
	}
	col, sizes, err := b.windowArgs(f, wn, want)
	if err != nil {
		return nil, err
	}
	w := b.window
	ok := col == w.TimeCol
	switch kind {
	case WindowTumble:
		ok = ok && sizes[0] == w.Size
	case WindowHop:
		ok = ok && sizes[0] == w.Slide && sizes[1] == w.Size
	case WindowSession:
		ok = ok && sizes[0] == w.Gap
	}
	b.setPos(f)
	if !ok {
		return nil, b.errf(CodeTypeMismatch, "the arguments of %s must match the GROUP BY window", name)
	}
	i := len(b.keys)
	lname := "window_start"
	if strings.HasSuffix(name, "_END") {
		i++
		lname = "window_end"
	}
	return &ColumnRef{Index: i, Name: lname, T: TypeTimestamp}, nil
}

// Rows converts the VALUES of an INSERT into rows of the target schema: listed columns (or
// all columns in order) receive the values cast to their types; other columns are NULL.
// Errors: 42703 unknown column, 42601 wrong number of values, 22023 a value that does not
// convert.
func (ins *Insert) Rows(target Schema) ([]Row, error) {
	idx := make([]int, 0, len(target))
	if ins.Columns == nil {
		for i := range target {
			idx = append(idx, i)
		}
	} else {
		for _, c := range ins.Columns {
			i := target.Index(c)
			if i < 0 {
				return nil, Errorf(CodeUnknownColumn, "column %s does not exist in %s", c, ins.Target)
			}
			idx = append(idx, i)
		}
	}
	out := make([]Row, 0, len(ins.Values))
	for r, vals := range ins.Values {
		if len(vals) != len(idx) {
			return nil, Errorf(CodeSyntax, "VALUES row %d has %d values for %d columns", r+1, len(vals), len(idx))
		}
		row := make(Row, len(target))
		for j, e := range vals {
			v, err := Eval(e, nil)
			if err != nil {
				return nil, err
			}
			col := target[idx[j]]
			cv, err := CastValue(v, col.Type)
			if err != nil {
				ce := err.(*Error)
				return nil, Errorf(ce.Code, "VALUES row %d, column %s: %s", r+1, col.Name, ce.Message)
			}
			row[idx[j]] = cv
		}
		out = append(out, row)
	}
	return out, nil
}
