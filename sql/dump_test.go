package sql

import (
	"fmt"
	"sort"
	"strings"
)

// testCatalog is the catalog of the golden tests.
type testCatalog map[string]*Relation

func (c testCatalog) Relation(name string) (*Relation, bool) {
	r, ok := c[strings.ToLower(name)]
	return r, ok
}

func newTestCatalog() testCatalog {
	orders := &Relation{Name: "orders", EventTime: 3, WatermarkDelay: 5000, Options: map[string]string{"connector": "file"},
		Schema: Schema{{"order_id", TypeBigInt}, {"user_id", TypeVarchar}, {"amount", TypeDouble}, {"ts", TypeTimestamp},
			{"price", Type{Kind: KindDecimal, Precision: 10, Scale: 2}}, {"qty", TypeInt}, {"payload", TypeJSON}, {"vip", TypeBool}}}
	clicks := &Relation{Name: "clicks", EventTime: -1, Schema: Schema{{"url", TypeVarchar}, {"t", TypeTimestamp}, {"t2", TypeTimestamp}}}
	view := &Relation{Name: "user_counts", IsView: true, EventTime: -1, Schema: Schema{{"user_id", TypeVarchar}, {"n", TypeBigInt}}}
	totals := &Relation{Name: "totals", EventTime: -1, Schema: Schema{{"user_id", TypeVarchar}, {"window_start", TypeTimestamp}, {"window_end", TypeTimestamp}, {"n", TypeBigInt}}}
	return testCatalog{"orders": orders, "clicks": clicks, "user_counts": view, "totals": totals}
}

func dumpErr(err error) string {
	if e, ok := err.(*Error); ok {
		return fmt.Sprintf("ERROR %s at %d:%d: %s", e.Code, e.Line, e.Column, e.Message)
	}
	return "ERROR (not *sql.Error) " + err.Error()
}

func dumpStatement(st Statement) string {
	var b strings.Builder
	text, pos := st.Source()
	fmt.Fprintf(&b, "%T @%d %q\n", st, pos, text)
	opts := func(m map[string]string) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + m[k]
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	sel := func(s *Select) {
		if s != nil {
			fmt.Fprintf(&b, "  select @%d from=%s emit=%d %q\n", s.Pos, s.From, s.Emit, s.Text)
		}
	}
	switch s := st.(type) {
	case *CreateStream:
		fmt.Fprintf(&b, "  name=%s ifnotexists=%v watermark=%s delay=%d options=%s\n", s.Name, s.IfNotExists, s.WatermarkColumn, s.WatermarkDelay, opts(s.Options))
		if s.OrReplace {
			b.WriteString("  orreplace\n")
		}
		for _, c := range s.Columns {
			fmt.Fprintf(&b, "  column %s %s\n", c.Name, c.Type)
		}
		sel(s.As)
	case *CreateView:
		fmt.Fprintf(&b, "  name=%s ifnotexists=%v options=%s\n", s.Name, s.IfNotExists, opts(s.Options))
		if s.OrReplace {
			b.WriteString("  orreplace\n")
		}
		sel(s.As)
	case *Insert:
		fmt.Fprintf(&b, "  target=%s columns=%v\n", s.Target, s.Columns)
		for _, row := range s.Values {
			parts := make([]string, len(row))
			for i, e := range row {
				parts[i] = e.String() + ":" + e.Type().String()
			}
			fmt.Fprintf(&b, "  values (%s)\n", strings.Join(parts, ", "))
		}
		sel(s.Query)
	case *Select:
		sel(s)
	case *ShowStmt:
		fmt.Fprintf(&b, "  what=%s\n", s.What)
	case *ShowVar:
		fmt.Fprintf(&b, "  name=%s\n", s.Name)
	case *Describe:
		fmt.Fprintf(&b, "  name=%s\n", s.Name)
	case *Explain:
		fmt.Fprintf(&b, "  statement=%T\n", s.Statement)
		sel(s.Query)
	case *Drop:
		fmt.Fprintf(&b, "  kind=%s name=%s ifexists=%v\n", s.Kind, s.Name, s.IfExists)
	case *JobControl:
		fmt.Fprintf(&b, "  action=%s id=%s\n", s.Action, s.ID)
	case *SetStmt:
		fmt.Fprintf(&b, "  name=%s value=%s\n", s.Name, s.Value)
	case *Transaction:
		fmt.Fprintf(&b, "  action=%s\n", s.Action)
	case *CreateUser:
		fmt.Fprintf(&b, "  name=%s password=%s role=%s\n", s.Name, dumpPassword(s.Password), s.Role)
	case *AlterUser:
		fmt.Fprintf(&b, "  name=%s password=%s role=%s\n", s.Name, dumpPassword(s.Password), s.Role)
	case *DropUser:
		fmt.Fprintf(&b, "  name=%s ifexists=%v\n", s.Name, s.IfExists)
	}
	return b.String()
}

func dumpPassword(p *string) string {
	if p == nil {
		return "none"
	}
	return "'" + *p + "'"
}

func dumpQuery(q *Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "from: %s\n", dumpFrom(q.From))
	if w := q.Window; w != nil {
		fmt.Fprintf(&b, "window: kind=%d timecol=%d size=%d slide=%d gap=%d tvf=%v\n", w.Kind, w.TimeCol, w.Size, w.Slide, w.Gap, w.TVF)
	}
	if q.Where != nil {
		fmt.Fprintf(&b, "where: %s\n", q.Where)
	}
	for _, k := range q.GroupBy {
		fmt.Fprintf(&b, "key: %s %s\n", k, k.Type())
	}
	if q.Aggregated {
		fmt.Fprintf(&b, "aggregated\n")
	}
	for _, a := range q.Aggs {
		fmt.Fprintf(&b, "agg: %s %s\n", a, a.T)
	}
	if q.Having != nil {
		fmt.Fprintf(&b, "having: %s\n", exprRefs(q.Having))
	}
	for i, e := range q.Select {
		fmt.Fprintf(&b, "select %q: %s %s\n", q.Names[i], exprRefs(e), e.Type())
	}
	if q.Distinct {
		fmt.Fprintf(&b, "distinct\n")
	}
	if rn := q.RowNumber; rn != nil {
		parts := []string{}
		for _, p := range rn.Partition {
			parts = append(parts, exprRefs(p))
		}
		ord := []string{}
		for _, k := range rn.Order {
			ord = append(ord, fmt.Sprintf("%s desc=%v", exprRefs(k.Expr), k.Desc))
		}
		fmt.Fprintf(&b, "row_number col=%d partition=[%s] order=[%s]\n", rn.Col, strings.Join(parts, ", "), strings.Join(ord, ", "))
	}
	for _, k := range q.OrderBy {
		fmt.Fprintf(&b, "order by %s desc=%v\n", exprRefs(k.Expr), k.Desc)
	}
	for i, a := range q.Attrs {
		if a != (ColAttr{}) {
			fmt.Fprintf(&b, "attr %d: time=%v window=%d end=%v\n", i, a.Time, a.Window, a.End)
		}
	}
	fmt.Fprintf(&b, "emit=%d limit=%d offset=%d\n", q.Emit, q.Limit, q.Offset)
	return b.String()
}

// dumpFrom renders a FROM tree on one line.
func dumpFrom(f From) string {
	switch f := f.(type) {
	case *FromRelation:
		return f.Rel.Name
	case *FromQuery:
		return "(" + strings.TrimSuffix(strings.ReplaceAll(dumpQuery(f.Query), "\n", "; "), "; ") + ") " + f.Name
	case *FromUnion:
		parts := make([]string, len(f.Inputs))
		for i, q := range f.Inputs {
			parts[i] = "(" + strings.TrimSuffix(strings.ReplaceAll(dumpQuery(q), "\n", "; "), "; ") + ")"
		}
		return strings.Join(parts, " UNION ALL ")
	case *FromNothing:
		return ""
	case *FromJoin:
		out := dumpFrom(f.Left) + " " + f.LeftName + " " + f.Kind.String() + " JOIN " + dumpFrom(f.Right) + " " + f.RightName + " ON " + exprRefs(f.On)
		if f.AsOf != nil {
			out += " AS OF " + exprRefs(f.AsOf)
		}
		return out
	case *FromLateral:
		args := make([]string, len(f.Args))
		for i, a := range f.Args {
			args[i] = exprRefs(a)
		}
		cols := make([]string, len(f.Cols))
		for i, c := range f.Cols {
			cols[i] = c.Name + " " + c.Type.String()
		}
		return fmt.Sprintf("%s LATERAL(outer=%v) %s(%s) AS %s(%s)", dumpFrom(f.Input), f.Outer, strings.ToLower(f.Func.Name),
			strings.Join(args, ", "), f.Name, strings.Join(cols, ", "))
	}
	return "?"
}

// exprRefs renders e with column indexes: name#i.
func exprRefs(e Expr) string {
	r, _ := Transform(e, func(x Expr) (Expr, error) {
		if c, ok := x.(*ColumnRef); ok {
			return &ColumnRef{Index: c.Index, Name: fmt.Sprintf("%s#%d", c.Name, c.Index), T: c.T}, nil
		}
		return x, nil
	})
	return r.String()
}
