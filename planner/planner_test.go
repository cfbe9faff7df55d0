package planner

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"rsql/sql"
)

// testRelation returns an orders stream over the given connector options.
func testRelation(name string, opts map[string]string) *sql.Relation {
	return &sql.Relation{
		Name: name,
		Schema: sql.Schema{
			{Name: "order_id", Type: sql.TypeBigInt},
			{Name: "user_id", Type: sql.TypeVarchar},
			{Name: "amount", Type: sql.TypeDouble},
			{Name: "ts", Type: sql.TypeTimestamp},
			{Name: "note", Type: sql.TypeVarchar},
		},
		Options:        opts,
		EventTime:      3,
		WatermarkDelay: 5000,
	}
}

func fileOrders() *sql.Relation {
	return testRelation("orders", map[string]string{"connector": "file", "path": "orders.jsonl", "format": "json"})
}

func mqOrders() *sql.Relation {
	return testRelation("orders_mq", map[string]string{"topic": "orders", "queues": "8"})
}

func col(r *sql.Relation, name string) *sql.ColumnRef {
	i := r.Schema.Index(name)
	if i < 0 {
		panic("no column " + name)
	}
	return &sql.ColumnRef{Index: i, Name: r.Schema[i].Name, T: r.Schema[i].Type}
}

func ref(i int, name string, t sql.Type) *sql.ColumnRef {
	return &sql.ColumnRef{Index: i, Name: name, T: t}
}

func call(t *testing.T, fn string, args ...sql.Expr) sql.Expr {
	t.Helper()
	e, err := sql.NewCall(fn, args...)
	if err != nil {
		t.Fatalf("NewCall(%s): %v", fn, err)
	}
	return e
}

func lit(v sql.Value) sql.Expr { return sql.NewLiteral(v) }

func mustPlan(t *testing.T, q *sql.Query, opts Options) (LogicalNode, *Physical) {
	t.Helper()
	l, p, err := Plan(q, opts)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return l, p
}

// run pushes rows through a stage's stateless pipeline (filters and projections) and
// returns what comes out.
func run(t *testing.T, s *Stage, rows []sql.Row) []sql.Row {
	t.Helper()
	var out []sql.Row
next:
	for _, r := range rows {
		for _, n := range s.Nodes() {
			switch n := n.(type) {
			case *FilterNode:
				if !n.Pred(r).Truth() {
					continue next
				}
			case *ProjectNode:
				nr := make(sql.Row, len(n.Exprs))
				for i, f := range n.Exprs {
					nr[i] = f(r)
				}
				r = nr
			case *ExchangeNode:
			default:
				t.Fatalf("run: %T is not stateless", n)
			}
		}
		out = append(out, r)
	}
	return out
}

// pick builds the pruned row of a stage source from a full stream row.
func pick(src SourceSpec, full sql.Row) sql.Row {
	r := make(sql.Row, len(src.Columns))
	for i, c := range src.Columns {
		r[i] = full[c]
	}
	return r
}

func TestFilterProjectPrunesAndRuns(t *testing.T) {
	r := fileOrders()
	q := &sql.Query{
		From:  &sql.FromRelation{Rel: r},
		Where: call(t, ">", col(r, "amount"), lit(sql.Double(100))),
		Select: []sql.Expr{
			col(r, "user_id"),
			call(t, "*", col(r, "amount"), lit(sql.Double(2))),
		},
		Names: []string{"user_id", "dbl"},
		Limit: -1,
	}
	_, p := mustPlan(t, q, Options{})
	if len(p.Stages) != 1 {
		t.Fatalf("stages = %d, want 1", len(p.Stages))
	}
	s := p.Stages[0]
	if want := []int{1, 2, 3}; !reflect.DeepEqual(s.Source().Columns, want) {
		t.Errorf("source columns = %v, want %v (user_id, amount and the event-time column)", s.Source().Columns, want)
	}
	if s.Source().EventTime != 2 {
		t.Errorf("event time = %d, want 2 (ts is kept: watermarks and bad-record checks need it)", s.Source().EventTime)
	}
	if s.Source().FromStage != -1 || s.Source().Connector != "file" || s.Source().Stream != "orders" {
		t.Errorf("source = %+v", s.Source())
	}
	full := []sql.Row{
		{sql.BigInt(1), sql.Varchar("u1"), sql.Double(150), sql.Timestamp(1000), sql.Varchar("a")},
		{sql.BigInt(2), sql.Varchar("u2"), sql.Double(50), sql.Timestamp(2000), sql.Varchar("b")},
		{sql.BigInt(3), sql.Varchar("u3"), sql.Double(100.5), sql.Timestamp(3000), sql.Varchar("c")},
		{sql.BigInt(4), sql.Varchar("u4"), sql.Null, sql.Timestamp(4000), sql.Varchar("d")},
	}
	var in []sql.Row
	for _, f := range full {
		in = append(in, pick(s.Source(), f))
	}
	got := run(t, s, in)
	want := []sql.Row{
		{sql.Varchar("u1"), sql.Double(300)},
		{sql.Varchar("u3"), sql.Double(201)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if s.Sink.Stream != "" || len(s.Sink.KeyColumns) != 0 {
		t.Errorf("sink = %+v", s.Sink)
	}
	if names := s.Sink.Schema.Names(); !reflect.DeepEqual(names, []string{"user_id", "dbl"}) {
		t.Errorf("sink schema = %v", names)
	}
}

func TestPushDownBelowWindowAssign(t *testing.T) {
	r := fileOrders()
	n := len(r.Schema)
	ws := ref(n, "window_start", sql.TypeTimestamp)
	q := &sql.Query{
		From:   &sql.FromRelation{Rel: r},
		Window: &sql.Window{Kind: sql.WindowTumble, TimeCol: 3, Size: 10000, TVF: true},
		Where: call(t, "AND",
			call(t, ">", ws, lit(sql.Timestamp(10000))),
			call(t, "=", col(r, "user_id"), lit(sql.Varchar("u1")))),
		Select: []sql.Expr{col(r, "order_id"), ws},
		Names:  []string{"order_id", "window_start"},
		Limit:  -1,
	}
	l, p := mustPlan(t, q, Options{})
	// Expected shape: Sink → Project → Filter(ws) → WindowAssign → Filter(user_id) → Scan.
	chain, err := flatten(l)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, n := range chain {
		kinds = append(kinds, strings.Fields(n.String())[0])
	}
	if want := []string{"Scan", "Filter", "WindowAssign", "Filter", "Project", "Sink"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("plan = %v, want %v\n%s", kinds, want, Explain(l, nil))
	}
	if f := chain[1].(*Filter); !strings.Contains(f.Pred.String(), "user_id") {
		t.Errorf("pushed filter = %s", f.Pred)
	}
	if f := chain[3].(*Filter); !strings.Contains(f.Pred.String(), "window_start") {
		t.Errorf("filter above window = %s", f.Pred)
	}
	s := p.Stages[0]
	// Scan keeps order_id, user_id, ts (window time and event time).
	if want := []int{0, 1, 3}; !reflect.DeepEqual(s.Source().Columns, want) {
		t.Errorf("columns = %v, want %v", s.Source().Columns, want)
	}
	if s.Source().EventTime != 2 {
		t.Errorf("event time = %d, want 2", s.Source().EventTime)
	}
	wa := s.Nodes()[1].(*WindowAssignNode)
	if wa.Window.Kind != WindowTumble || wa.Window.Time != 2 || wa.Window.Size != 10000 {
		t.Errorf("window = %+v", wa.Window)
	}
	// The filter above the window reads window_start at index 3 of the 5-column row.
	above := s.Nodes()[2].(*FilterNode)
	row := sql.Row{sql.BigInt(1), sql.Varchar("u1"), sql.Timestamp(25000), sql.Timestamp(20000), sql.Timestamp(30000)}
	if !above.Pred(row).Truth() {
		t.Errorf("filter above window rejects window_start 20000")
	}
	row[3] = sql.Timestamp(0)
	if above.Pred(row).Truth() {
		t.Errorf("filter above window accepts window_start 0")
	}
	below := s.Nodes()[0].(*FilterNode)
	if !below.Pred(sql.Row{sql.BigInt(1), sql.Varchar("u1"), sql.Timestamp(0)}).Truth() ||
		below.Pred(sql.Row{sql.BigInt(1), sql.Varchar("u2"), sql.Timestamp(0)}).Truth() {
		t.Errorf("pushed filter evaluates wrongly")
	}
	proj := s.Nodes()[3].(*ProjectNode)
	out := sql.Row{proj.Exprs[0](row), proj.Exprs[1](row)}
	if want := (sql.Row{sql.BigInt(1), sql.Timestamp(0)}); !reflect.DeepEqual(out, want) {
		t.Errorf("project = %v, want %v", out, want)
	}
}

// tvfQuery is SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
// FROM TUMBLE(r, ts, 10s) GROUP BY user_id, window_start, window_end, bound per sql.Query's
// layout: the aggregate row is user_id, ws, we (group by), ws, we (window), COUNT, SUM.
func tvfQuery(r *sql.Relation) *sql.Query {
	n := len(r.Schema)
	return &sql.Query{
		From:       &sql.FromRelation{Rel: r},
		Window:     &sql.Window{Kind: sql.WindowTumble, TimeCol: 3, Size: 10000, TVF: true},
		GroupBy:    []sql.Expr{col(r, "user_id"), ref(n, "window_start", sql.TypeTimestamp), ref(n+1, "window_end", sql.TypeTimestamp)},
		Aggregated: true,
		Aggs: []sql.AggCall{
			{Func: "COUNT", Star: true, T: sql.TypeBigInt},
			{Func: "SUM", Arg: col(r, "amount"), T: sql.TypeDouble},
		},
		Select: []sql.Expr{
			ref(0, "user_id", sql.TypeVarchar),
			ref(1, "window_start", sql.TypeTimestamp),
			ref(4, "window_end", sql.TypeTimestamp),
			ref(5, "n", sql.TypeBigInt),
			ref(6, "total", sql.TypeDouble),
		},
		Names: []string{"user_id", "window_start", "window_end", "n", "total"},
		Limit: -1,
	}
}

func TestWindowedAggregateFileNoExchange(t *testing.T) {
	r := fileOrders()
	_, p := mustPlan(t, tvfQuery(r), Options{Job: "j", Sink: SinkSpec{Stream: "totals", Connector: "file"}})
	if len(p.Stages) != 1 {
		t.Fatalf("stages = %d, want 1 (file source is one split)", len(p.Stages))
	}
	s := p.Stages[0]
	if want := []int{1, 2, 3}; !reflect.DeepEqual(s.Source().Columns, want) {
		t.Errorf("columns = %v, want %v", s.Source().Columns, want)
	}
	a := s.Nodes()[0].(*AggregateNode)
	if a.Window.Kind != WindowTumble || a.Window.Time != 2 || a.Emit != EmitOnClose {
		t.Errorf("aggregate window/emit = %+v %v", a.Window, a.Emit)
	}
	if len(a.Keys) != 1 || a.Texts[0] != "user_id" {
		t.Errorf("keys = %v", a.Texts)
	}
	if a.Aggs[0].Text != "COUNT(*)" || len(a.Aggs[0].Args) != 0 || !strings.HasPrefix(a.Aggs[1].Text, "SUM(") || a.Aggs[1].Type != sql.TypeDouble {
		t.Errorf("aggs = %+v", a.Aggs)
	}
	if got := a.Aggs[1].Args[0](sql.Row{sql.Varchar("u"), sql.Double(7.5), sql.Timestamp(0)}); got != sql.Double(7.5) {
		t.Errorf("SUM argument reads %v", got)
	}
	if got := a.Keys[0](sql.Row{sql.Varchar("u"), sql.Double(7.5), sql.Timestamp(0)}); got != sql.Varchar("u") {
		t.Errorf("key reads %v", got)
	}
	// Select over the aggregate row user_id, ws, we, n, total.
	proj := s.Nodes()[1].(*ProjectNode)
	agg := sql.Row{sql.Varchar("u"), sql.Timestamp(10000), sql.Timestamp(20000), sql.BigInt(3), sql.Double(9)}
	var out sql.Row
	for _, f := range proj.Exprs {
		out = append(out, f(agg))
	}
	if !reflect.DeepEqual(out, agg) {
		t.Errorf("select = %v, want %v", out, agg)
	}
	if want := []int{0, 1, 2}; !reflect.DeepEqual(s.Sink.KeyColumns, want) {
		t.Errorf("sink key columns = %v, want %v", s.Sink.KeyColumns, want)
	}
	if s.Sink.Stream != "totals" || s.Sink.Connector != "file" {
		t.Errorf("sink = %+v", s.Sink)
	}
}

func TestExchangeInsertedForBrokerSource(t *testing.T) {
	r := mqOrders()
	_, p := mustPlan(t, tvfQuery(r), Options{Job: "j7"})
	if len(p.Stages) != 2 {
		t.Fatalf("stages = %d, want 2", len(p.Stages))
	}
	s0, s1 := p.Stages[0], p.Stages[1]
	x, ok := s0.Nodes()[len(s0.Nodes())-1].(*ExchangeNode)
	if !ok {
		t.Fatalf("stage 0 does not end with an exchange: %#v", s0.Nodes())
	}
	if x.Topic != "j7-0-shuffle" || !reflect.DeepEqual(x.Texts, []string{"user_id"}) || x.Queues != 0 {
		t.Errorf("exchange = %+v", x)
	}
	stage0Row := sql.Row{sql.Varchar("u9"), sql.Double(1), sql.Timestamp(5)}
	if got := x.Keys[0](stage0Row); got != sql.Varchar("u9") {
		t.Errorf("exchange key = %v", got)
	}
	if s1.Source().FromStage != 0 || s1.Source().Stream != "j7-0-shuffle" || s1.Source().Connector != ShuffleConnector {
		t.Errorf("stage 1 source = %+v", s1.Source())
	}
	if names := s1.Source().Schema.Names(); !reflect.DeepEqual(names, []string{"user_id", "amount", "ts"}) {
		t.Errorf("shuffled schema = %v", names)
	}
	if s1.Source().EventTime != 2 || s1.Source().WatermarkDelay != 5000 {
		t.Errorf("stage 1 event time = %d delay %d", s1.Source().EventTime, s1.Source().WatermarkDelay)
	}
	if _, ok := s1.Nodes()[0].(*AggregateNode); !ok {
		t.Errorf("stage 1 starts with %T", s1.Nodes()[0])
	}
}

func TestExchangeOmittedWhenPartitionedByKey(t *testing.T) {
	r := testRelation("orders_keyed", map[string]string{"queues": "8", "partitioned_by": "USER_ID"})
	_, p := mustPlan(t, tvfQuery(r), Options{})
	if len(p.Stages) != 1 {
		t.Fatalf("stages = %d, want 1 (source partitioned by the group key)", len(p.Stages))
	}
	r = testRelation("orders_one", map[string]string{"queues": "1"})
	if _, p = mustPlan(t, tvfQuery(r), Options{}); len(p.Stages) != 1 {
		t.Fatalf("stages = %d, want 1 (one queue)", len(p.Stages))
	}
	r = testRelation("orders_other", map[string]string{"queues": "8", "key": "order_id"})
	if _, p = mustPlan(t, tvfQuery(r), Options{}); len(p.Stages) != 2 {
		t.Fatalf("stages = %d, want 2 (partitioned by another column)", len(p.Stages))
	}
}

func TestGlobalAggregateShufflesToOneQueue(t *testing.T) {
	r := mqOrders()
	q := &sql.Query{
		From:       &sql.FromRelation{Rel: r},
		Aggregated: true,
		Aggs:       []sql.AggCall{{Func: "COUNT", Distinct: true, Arg: col(r, "user_id"), T: sql.TypeBigInt}},
		Select:     []sql.Expr{ref(0, "users", sql.TypeBigInt)},
		Names:      []string{"users"},
		Limit:      -1,
	}
	_, p := mustPlan(t, q, Options{Job: "g"})
	if len(p.Stages) != 2 {
		t.Fatalf("stages = %d, want 2", len(p.Stages))
	}
	x := p.Stages[0].Exchange
	if x.Queues != 1 || len(x.Keys) != 0 {
		t.Errorf("exchange = %+v", x)
	}
	if p.Stages[1].Source().Options.Queues != 1 {
		t.Errorf("shuffle source options = %v", p.Stages[1].Source().Options)
	}
	a := p.Stages[1].Nodes()[0].(*AggregateNode)
	if !strings.HasPrefix(a.Aggs[0].Text, "COUNT(DISTINCT ") || a.Emit != EmitChanges || a.Window.Kind != WindowNone {
		t.Errorf("aggregate = %+v", a)
	}
	// Stage 0 projects only user_id; the event-time column is not needed without a window.
	if names := p.Stages[1].Source().Schema.Names(); !reflect.DeepEqual(names, []string{"user_id"}) {
		t.Errorf("shuffled columns = %v", names)
	}
}

func TestHavingOnKeyPushedBelowAggregate(t *testing.T) {
	r := fileOrders()
	cnt := ref(1, "n", sql.TypeBigInt)
	q := &sql.Query{
		From:       &sql.FromRelation{Rel: r},
		GroupBy:    []sql.Expr{col(r, "user_id")},
		Aggregated: true,
		Aggs: []sql.AggCall{
			{Func: "COUNT", Star: true, T: sql.TypeBigInt},
			{Func: "MAX", Arg: col(r, "amount"), T: sql.TypeDouble}, // never selected: pruned
		},
		Having: call(t, "AND",
			call(t, "<>", ref(0, "user_id", sql.TypeVarchar), lit(sql.Varchar("bot"))),
			call(t, ">", cnt, lit(sql.BigInt(1)))),
		Select: []sql.Expr{ref(0, "user_id", sql.TypeVarchar), cnt},
		Names:  []string{"user_id", "n"},
		Emit:   sql.EmitChanges,
		Limit:  10,
	}
	l, p := mustPlan(t, q, Options{})
	text := Explain(l, nil)
	chain, _ := flatten(l)
	f, ok := chain[1].(*Filter)
	if !ok || f.Pred.String() != "(user_id <> 'bot')" {
		t.Fatalf("expected the key predicate right above the scan:\n%s", text)
	}
	agg, ok := chain[2].(*Aggregate)
	if !ok || len(agg.Aggs) != 1 {
		t.Fatalf("expected the aggregate with MAX pruned:\n%s", text)
	}
	s := p.Stages[0]
	if want := []int{1, 3}; !reflect.DeepEqual(s.Source().Columns, want) {
		t.Errorf("columns = %v, want %v (user_id, and the event-time column ts, which is always read)", s.Source().Columns, want)
	}
	having := s.Nodes()[2].(*FilterNode)
	if !having.Pred(sql.Row{sql.Varchar("u"), sql.BigInt(2)}).Truth() || having.Pred(sql.Row{sql.Varchar("u"), sql.BigInt(1)}).Truth() {
		t.Errorf("HAVING evaluates wrongly: %s", having.Text)
	}
	if lim, ok := s.Nodes()[len(s.Nodes())-1].(*LimitNode); !ok || lim.N != 10 {
		t.Errorf("last operator = %#v, want Limit 10", s.Nodes()[len(s.Nodes())-1])
	}
	if want := []int{0}; !reflect.DeepEqual(s.Sink.KeyColumns, want) {
		t.Errorf("key columns = %v", s.Sink.KeyColumns)
	}
}

func TestConstantFolding(t *testing.T) {
	r := fileOrders()
	q := &sql.Query{
		From: &sql.FromRelation{Rel: r},
		Where: call(t, "AND",
			call(t, "=", lit(sql.BigInt(1)), lit(sql.BigInt(1))),
			call(t, ">", col(r, "amount"), call(t, "*", lit(sql.Double(2)), lit(sql.Double(50))))),
		Select: []sql.Expr{col(r, "order_id")},
		Names:  []string{"order_id"},
		Limit:  -1,
	}
	l, err := Logical(q)
	if err != nil {
		t.Fatal(err)
	}
	l, err = FoldConstants(l)
	if err != nil {
		t.Fatal(err)
	}
	l = PushDownPredicates(l)
	text := Explain(l, nil)
	if !strings.Contains(text, "Filter (amount > 100)") || strings.Contains(text, "1 = 1") {
		t.Errorf("constant folding + push-down gave:\n%s", text)
	}
	// A predicate that folds to TRUE disappears.
	q.Where = call(t, "=", lit(sql.BigInt(1)), lit(sql.BigInt(1)))
	l, _ = Logical(q)
	l, _ = Optimize(l)
	if strings.Contains(Explain(l, nil), "Filter") {
		t.Errorf("TRUE filter kept:\n%s", Explain(l, nil))
	}
}

func TestLogicalErrors(t *testing.T) {
	r := fileOrders()
	cases := []struct {
		name string
		q    *sql.Query
		code string
	}{
		{"session tvf without aggregation", &sql.Query{From: &sql.FromRelation{Rel: r}, Window: &sql.Window{Kind: sql.WindowSession, TimeCol: 3, Gap: 1000, TVF: true},
			Select: []sql.Expr{col(r, "user_id")}, Names: []string{"user_id"}, Limit: -1}, sql.CodeNotSupported},
		{"emit on close without window", &sql.Query{From: &sql.FromRelation{Rel: r}, GroupBy: []sql.Expr{col(r, "user_id")}, Aggregated: true, Emit: sql.EmitOnClose,
			Select: []sql.Expr{ref(0, "user_id", sql.TypeVarchar)}, Names: []string{"user_id"}, Limit: -1}, sql.CodeNotSupported},
		{"bad tumble size", &sql.Query{From: &sql.FromRelation{Rel: r}, Window: &sql.Window{Kind: sql.WindowTumble, TimeCol: 3, TVF: true},
			Select: []sql.Expr{col(r, "user_id")}, Names: []string{"user_id"}, Limit: -1}, sql.CodeInvalidValue},
		{"select out of aggregate row", &sql.Query{From: &sql.FromRelation{Rel: r}, GroupBy: []sql.Expr{col(r, "user_id")}, Aggregated: true,
			Select: []sql.Expr{ref(3, "x", sql.TypeBigInt)}, Names: []string{"x"}, Limit: -1}, sql.CodeInternal},
		{"aggregate type disagrees", &sql.Query{From: &sql.FromRelation{Rel: r}, Aggregated: true, Aggs: []sql.AggCall{{Func: "AVG", Arg: col(r, "amount"), T: sql.TypeBigInt}},
			Select: []sql.Expr{ref(0, "a", sql.TypeBigInt)}, Names: []string{"a"}, Limit: -1}, sql.CodeInternal},
	}
	for _, c := range cases {
		_, _, err := Plan(c.q, Options{})
		var se *sql.Error
		if !errors.As(err, &se) || se.Code != c.code {
			t.Errorf("%s: err = %v, want code %s", c.name, err, c.code)
		}
	}
}

func TestAggResultTypes(t *testing.T) {
	dec := sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}
	arg := func(ty sql.Type) sql.Expr { return ref(0, "x", ty) }
	cases := []struct {
		g    sql.AggCall
		want sql.Type
	}{
		{sql.AggCall{Func: "COUNT", Star: true}, sql.TypeBigInt},
		{sql.AggCall{Func: "COUNT", Distinct: true, Arg: arg(sql.TypeVarchar)}, sql.TypeBigInt},
		{sql.AggCall{Func: "SUM", Arg: arg(sql.TypeInt)}, sql.TypeBigInt},
		{sql.AggCall{Func: "SUM", Arg: arg(sql.TypeDouble)}, sql.TypeDouble},
		{sql.AggCall{Func: "SUM", Arg: arg(dec)}, sql.Type{Kind: sql.KindDecimal, Precision: 18, Scale: 2}},
		{sql.AggCall{Func: "AVG", Arg: arg(sql.TypeInt)}, sql.TypeDouble},
		{sql.AggCall{Func: "MIN", Arg: arg(sql.TypeTimestamp)}, sql.TypeTimestamp},
		{sql.AggCall{Func: "MAX", Arg: arg(dec)}, dec},
	}
	for _, c := range cases {
		got, err := aggResultType(c.g)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", aggText(c.g), got, err, c.want)
		}
	}
}

// Plans that Logical never builds, but a rule must still handle: a filter above a projection
// moves below it with the projected expressions substituted; a filter above a Limit stays.
func TestPushDownThroughProjectNotLimit(t *testing.T) {
	r := fileOrders()
	scan := &Scan{Relation: r, Columns: []int{0, 1, 2, 3, 4}}
	dbl := call(t, "*", col(r, "amount"), lit(sql.Double(2)))
	proj := &Project{Input: scan, Exprs: []sql.Expr{col(r, "user_id"), dbl}, Names: []string{"u", "d"}}
	pred := call(t, ">", ref(1, "d", sql.TypeDouble), lit(sql.Double(300)))
	var l LogicalNode = &Sink{Input: &Filter{Input: proj, Pred: pred}}
	got := PushDownPredicates(l)
	if want := "Sink client columns=[u, d]|Project user_id AS u, (amount * 2) AS d|Filter ((amount * 2) > 300)|Scan orders columns=[order_id, user_id, amount, ts, note]"; explainLine(got) != want {
		t.Errorf("push-down through a projection:\n got %s\nwant %s", explainLine(got), want)
	}
	stream := genOrders(500, 5, 3)
	if a, b := sortedText(evalLogical(t, l, stream)), sortedText(evalLogical(t, got, stream)); strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) == 0 {
		t.Errorf("push-down through a projection changed the rows: %d vs %d", len(a), len(b))
	}

	l = &Sink{Input: &Filter{Input: &Limit{Input: scan, N: 3}, Pred: call(t, ">", col(r, "amount"), lit(sql.Double(1)))}}
	if got := PushDownPredicates(l); explainLine(got) != explainLine(l) {
		t.Errorf("filter moved below a limit: %s", explainLine(got))
	}
}

func explainLine(l LogicalNode) string {
	var parts []string
	for n := l; n != nil; {
		parts = append(parts, n.String())
		if ch := n.Children(); len(ch) == 1 {
			n = ch[0]
		} else {
			n = nil
		}
	}
	return strings.Join(parts, "|")
}

func BenchmarkPlan(b *testing.B) {
	cat := goldenCatalog()
	stmts, err := sql.Parse(`SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
		FROM TUMBLE(orders_mq, ts, INTERVAL '10' SECOND) WHERE amount > 0 AND user_id <> 'bot'
		GROUP BY user_id, window_start, window_end HAVING COUNT(*) > 1`)
	if err != nil {
		b.Fatal(err)
	}
	q, err := sql.Bind(stmts[0].(*sql.Select), cat)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Plan(q, Options{Job: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}

// flatten returns the nodes of a plan whose nodes have one input each, from its Scan up.
func flatten(l LogicalNode) ([]LogicalNode, error) {
	var out []LogicalNode
	for n := l; n != nil; {
		out = append(out, n)
		ch := n.Children()
		switch len(ch) {
		case 0:
			n = nil
		case 1:
			n = ch[0]
		default:
			return nil, errorf(sql.CodeInternal, "%s has %d inputs", n, len(ch))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// COUNT(DISTINCT) calls over one column, unfiltered or filtered by CASE WHEN p THEN x
// [ELSE NULL] END, are families of at most sql.MaxFamilyMembers; other calls are not.
func TestDistinctFamilies(t *testing.T) {
	r := fileOrders()
	user, cat := col(r, "user_id"), col(r, "note")
	p := &sql.Call{Func: "=", Args: []sql.Expr{cat, &sql.Literal{V: sql.Varchar("a")}}, T: sql.TypeBool}
	when := func(x sql.Expr, els sql.Expr) sql.Expr {
		return &sql.Case{Whens: []sql.Expr{p}, Thens: []sql.Expr{x}, Else: els, T: x.Type()}
	}
	distinct := func(arg sql.Expr) sql.AggCall {
		return sql.AggCall{Func: "COUNT", Distinct: true, Arg: arg, T: sql.TypeBigInt}
	}
	aggs := []sql.AggCall{
		distinct(user), // 0
		{Func: "COUNT", Arg: user, T: sql.TypeBigInt},          // not DISTINCT
		distinct(when(user, nil)),                              // 2
		distinct(when(user, &sql.Literal{V: sql.Null})),        // 3
		distinct(when(user, &sql.Literal{V: sql.Varchar("")})), // ELSE a value: not a filter
		distinct(cat), // alone over its column
		{Func: "MIN", Distinct: true, Arg: user, T: sql.TypeVarchar},
		distinct(&sql.Case{Whens: []sql.Expr{p, p}, Thens: []sql.Expr{user, user}, T: sql.TypeVarchar}),
	}
	if got, want := distinctFamilies(aggs), [][]int{{0, 2, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("families %v, want %v", got, want)
	}
	var many []sql.AggCall
	for range sql.MaxFamilyMembers + 2 {
		many = append(many, distinct(when(user, nil)))
	}
	many = append(many, distinct(cat), distinct(when(cat, nil)))
	if got, want := distinctFamilies(many), [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9}, {10, 11}}; !reflect.DeepEqual(got, want) {
		t.Errorf("families %v, want %v", got, want)
	}
}
