package tests

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The random queries of the differential test (pgdiff_test.go): compositions of a base
// relation (the orders stream, filtered or not; its 10-second tumbling windows; an inner or
// LEFT join with users on the user key; a UNION ALL of two filters) and one to three layers
// over it (GROUP BY with aggregates, HAVING and DISTINCT; WHERE; SELECT DISTINCT; Top-N with
// ROW_NUMBER()), each layer a derived table of the next, sometimes ordered and limited at the
// end; and half as many with a layer of aggregates over a window of rows (AGG(x) OVER
// (... ROWS n PRECEDING)). Each is written in both dialects (only the window differs) and must equal
// PostgreSQL's answer or be refused with 0A000.

// pdGCol is a column of a generated relation and the kind of its values.
type pdGCol struct {
	name string
	kind string // int, float, str, ts, big (a BIGINT near the limits: never summed)
}

// pdRel is a FROM item in both dialects, with its alias.
type pdRel struct {
	r, p      string
	cols      []pdGCol
	rawWindow bool // a window table function: a GROUP BY over it must hold the window bounds
	windowed  bool // has window_start and window_end of a window
}

type pdGen struct {
	r *rand.Rand
	n int // names of aliases and aggregate columns
}

func (g *pdGen) name(prefix string) string {
	g.n++
	return prefix + strconv.Itoa(g.n)
}

func (g *pdGen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

var pdOrderCols = []pdGCol{{"order_id", "int"}, {"user_id", "str"}, {"category", "str"}, {"amount", "float"},
	{"qty", "int"}, {"big", "big"}, {"ts", "ts"}}

// pred is a condition on one column of cols that PostgreSQL and rsql read alike.
func (g *pdGen) pred(cols []pdGCol) string {
	var cands []pdGCol
	for _, c := range cols {
		if c.kind != "ts" {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return cols[g.r.Intn(len(cols))].name + " IS NOT NULL"
	}
	c := cands[g.r.Intn(len(cands))]
	if g.r.Intn(8) == 0 {
		return c.name + g.pick(" IS NULL", " IS NOT NULL")
	}
	switch c.kind {
	case "int":
		k := g.pick("0", "1", "2", "3", "5", "8", "20", "60", "65", "500", "1000")
		switch g.r.Intn(4) {
		case 0:
			return c.name + " = " + k
		case 1:
			return c.name + " BETWEEN " + k + " AND " + k + " + " + g.pick("2", "10", "100")
		}
		return c.name + g.pick(" > ", " >= ", " < ", " <> ") + k
	case "float":
		return c.name + g.pick(" > ", " < ") + g.pick("10.005", "50.005", "100.005", "150.005", "1000.005")
	case "big":
		return c.name + g.pick(" > 0", " < 0", " > 1000")
	default:
		if c.name == "category" {
			return c.name + g.pick(" = 'a'", " <> 'b'", " IN ('a', 'c')", " > 'b'")
		}
		return c.name + g.pick(" = 'u3'", " <> 'u7'", " IN ('u1', 'u10', 'u20', 'u7')", " < 'u2'", " > 'n3'")
	}
}

func (g *pdGen) base() pdRel {
	a := g.name("t")
	switch g.r.Intn(6) {
	case 0, 1:
		return pdRel{r: "orders " + a, p: "orders " + a, cols: pdOrderCols}
	case 2:
		q := "(SELECT order_id, user_id, category, amount, qty, big, ts FROM orders WHERE " + g.pred(pdOrderCols) + ") " + a
		return pdRel{r: q, p: q, cols: pdOrderCols}
	case 3:
		cols := append(append([]pdGCol(nil), pdOrderCols...), pdGCol{"window_start", "ts"}, pdGCol{"window_end", "ts"})
		return pdRel{r: pdTumbleRsql + " " + a, p: pdTumblePG + " " + a, cols: cols, rawWindow: true, windowed: true}
	case 4:
		join := g.pick("JOIN", "LEFT JOIN")
		cols := []pdGCol{{"order_id", "int"}, {"user_id", "str"}, {"category", "str"}, {"amount", "float"},
			{"qty", "int"}, {"tier", "int"}, {"name", "str"}}
		where := ""
		if g.r.Intn(2) == 0 {
			where = " WHERE o." + g.pred(cols[:5])
		}
		q := "(SELECT o.order_id, o.user_id, o.category, o.amount, o.qty, u.tier, u.name FROM orders o " + join +
			" users u ON o.user_id = u.user_id" + where + ") " + a
		return pdRel{r: q, p: q, cols: cols}
	default:
		cols := []pdGCol{{"user_id", "str"}, {"category", "str"}, {"amount", "float"}, {"qty", "int"}, {"ts", "ts"}}
		sel := "SELECT user_id, category, amount, qty, ts FROM orders WHERE "
		q := "(" + sel + g.pred(cols) + " UNION ALL " + sel + g.pred(cols) + ") " + a
		return pdRel{r: q, p: q, cols: cols}
	}
}

func pdNames(cols []pdGCol) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// layer is one SELECT over rel, in both dialects, and its output columns.
type pdLayer struct {
	sel  string // the SELECT text with a %s where the FROM item goes
	cols []pdGCol
	win  bool
}

func (l pdLayer) wrap(in pdRel, alias string) pdRel {
	return pdRel{r: "(" + fmt.Sprintf(l.sel, in.r) + ") " + alias, p: "(" + fmt.Sprintf(l.sel, in.p) + ") " + alias,
		cols: l.cols, windowed: l.win}
}

// agg is an aggregate over one of cols (or COUNT(*)) and the kind of its value.
func (g *pdGen) agg(cols []pdGCol) (string, string) {
	c := cols[g.r.Intn(len(cols))]
	if g.r.Intn(4) == 0 {
		return "COUNT(*)", "int"
	}
	switch c.kind {
	case "int", "float":
		switch g.r.Intn(5) {
		case 0:
			return "SUM(" + c.name + ")", c.kind
		case 1:
			return "AVG(" + c.name + ")", "float"
		case 2:
			return "COUNT(" + c.name + ")", "int"
		}
		return g.pick("MIN", "MAX") + "(" + c.name + ")", c.kind
	case "big":
		if g.r.Intn(3) == 0 {
			return "COUNT(" + c.name + ")", "int"
		}
		return g.pick("MIN", "MAX") + "(" + c.name + ")", "big"
	default:
		if g.r.Intn(3) == 0 {
			return "COUNT(" + c.name + ")", "int"
		}
		return g.pick("MIN", "MAX") + "(" + c.name + ")", c.kind
	}
}

func (g *pdGen) aggLayer(in pdRel) pdLayer {
	var keys []pdGCol
	var groupable []pdGCol
	for _, c := range in.cols {
		switch {
		case c.name == "window_start" || c.name == "window_end":
		case c.kind == "int" || c.kind == "str" || (c.kind == "big" && g.r.Intn(4) == 0):
			groupable = append(groupable, c)
		}
	}
	g.r.Shuffle(len(groupable), func(i, j int) { groupable[i], groupable[j] = groupable[j], groupable[i] })
	nk := g.r.Intn(3)
	if nk > len(groupable) {
		nk = len(groupable)
	}
	keys = append(keys, groupable[:nk]...)
	win := in.windowed && (in.rawWindow || g.r.Intn(2) == 0)
	if win {
		keys = append(keys, pdGCol{"window_start", "ts"}, pdGCol{"window_end", "ts"})
	}
	var items []string
	var out []pdGCol
	dropped := false
	for _, k := range keys {
		if !win || (k.name != "window_start" && k.name != "window_end") {
			if len(keys) > 1 && g.r.Intn(6) == 0 {
				dropped = true
				continue
			}
		}
		items = append(items, k.name)
		out = append(out, k)
	}
	for i, n := 0, 1+g.r.Intn(3); i < n; i++ {
		expr, kind := g.agg(in.cols)
		name := g.name("c")
		items = append(items, expr+" AS "+name)
		out = append(out, pdGCol{name, kind})
	}
	distinct := ""
	if dropped && g.r.Intn(2) == 0 {
		distinct = "DISTINCT "
	}
	q := "SELECT " + distinct + strings.Join(items, ", ") + " FROM %s"
	if g.r.Intn(4) == 0 {
		q += " WHERE " + g.pred(in.cols)
	}
	if len(keys) > 0 {
		q += " GROUP BY " + strings.Join(pdNames(keys), ", ")
	}
	if g.r.Intn(3) == 0 {
		q += " HAVING " + g.having(in.cols)
	}
	return pdLayer{sel: q, cols: out, win: win && distinct == ""}
}

func (g *pdGen) having(cols []pdGCol) string {
	switch g.r.Intn(4) {
	case 0:
		return "COUNT(*) " + g.pick("= 1", "> 1", ">= 3", "> 60")
	case 1:
		for _, c := range cols {
			if c.kind == "int" && g.r.Intn(2) == 0 {
				return g.pick("MIN", "MAX") + "(" + c.name + ") " + g.pick("> 5", "< 3", "= 0", ">= 1")
			}
		}
		return "COUNT(*) > 2"
	case 2:
		for _, c := range cols {
			if c.kind == "float" {
				return "SUM(" + c.name + ") " + g.pick("> 100.005", "< 1000.005", "> 5000.005")
			}
		}
		return "COUNT(*) < 10"
	}
	for _, c := range cols {
		if c.kind == "str" {
			return "MAX(" + c.name + ") " + g.pick("> 'u5'", "< 'd'", "IS NOT NULL")
		}
	}
	return "COUNT(*) >= 1"
}

func (g *pdGen) filterLayer(in pdRel) pdLayer {
	return pdLayer{sel: "SELECT " + strings.Join(pdNames(in.cols), ", ") + " FROM %s WHERE " + g.pred(in.cols),
		cols: in.cols, win: in.windowed}
}

func (g *pdGen) distinctLayer(in pdRel) pdLayer {
	var cols []pdGCol
	for _, c := range in.cols {
		if c.kind != "float" && g.r.Intn(2) == 0 {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		cols = []pdGCol{in.cols[0]}
	}
	return pdLayer{sel: "SELECT DISTINCT " + strings.Join(pdNames(cols), ", ") + " FROM %s", cols: cols}
}

// topnLayer keeps the first rows by one column (then all the others, so the numbering is
// the same in both engines), per window when the input has windows and the coin says so.
func (g *pdGen) topnLayer(in pdRel) pdLayer {
	var first []pdGCol
	for _, c := range in.cols {
		if c.kind == "int" || c.kind == "float" {
			first = append(first, c)
		}
	}
	if len(first) == 0 {
		first = in.cols
	}
	lead := first[g.r.Intn(len(first))]
	order := []string{lead.name + g.pick(" DESC", " ASC", "")}
	for _, c := range in.cols {
		if c.name != lead.name {
			order = append(order, c.name)
		}
	}
	part := ""
	perWindow := in.windowed && g.r.Intn(3) != 0
	if perWindow {
		part = "PARTITION BY window_start, window_end "
	}
	rn := g.name("rn")
	inner := "SELECT " + strings.Join(pdNames(in.cols), ", ") + ", ROW_NUMBER() OVER (" + part + "ORDER BY " +
		strings.Join(order, ", ") + ") AS " + rn + " FROM %s"
	// The Top-N is the outer SELECT over the numbered rows; its FROM is the numbering query.
	alias := g.name("n")
	sel := "SELECT " + strings.Join(pdNames(in.cols), ", ") + ", " + rn + " FROM (" + inner + ") " + alias +
		" WHERE " + rn + g.pick(" <= 3", " = 1", " < 5", " <= 10")
	return pdLayer{sel: sel, cols: append(append([]pdGCol(nil), in.cols...), pdGCol{rn, "int"}), win: perWindow}
}

// overLayer adds one to three aggregates over a window of rows of in (AGG(x) OVER
// (PARTITION BY ... ORDER BY ... ROWS n PRECEDING)), ordered by one column and then all
// the others, so that rows equal in the order are equal in every column and the values are
// the same in both engines.
func (g *pdGen) overLayer(in pdRel) pdLayer {
	var lead []pdGCol
	var parts []pdGCol
	for _, c := range in.cols {
		switch c.kind {
		case "int", "float", "ts":
			lead = append(lead, c)
		case "str":
			parts = append(parts, c)
		}
	}
	if len(lead) == 0 {
		lead = in.cols
	}
	first := lead[g.r.Intn(len(lead))]
	order := []string{first.name + g.pick(" DESC", "")}
	for _, c := range in.cols {
		if c.name != first.name {
			order = append(order, c.name)
		}
	}
	w := ""
	if len(parts) > 0 && g.r.Intn(3) != 0 {
		w = "PARTITION BY " + parts[g.r.Intn(len(parts))].name + " "
	}
	n := strconv.Itoa(g.r.Intn(5))
	w += "ORDER BY " + strings.Join(order, ", ") + " " + g.pick("ROWS BETWEEN "+n+" PRECEDING AND CURRENT ROW", "ROWS "+n+" PRECEDING")
	cols := append([]pdGCol(nil), in.cols...)
	items := pdNames(in.cols)
	for k := 1 + g.r.Intn(3); k > 0; k-- {
		call, kind := g.agg(in.cols)
		name := g.name("w")
		items = append(items, call+" OVER ("+w+") AS "+name)
		cols = append(cols, pdGCol{name, kind})
	}
	where := ""
	if g.r.Intn(3) == 0 {
		where = " WHERE " + g.pred(in.cols)
	}
	return pdLayer{sel: "SELECT " + strings.Join(items, ", ") + " FROM %s" + where, cols: cols}
}

// overQuery generates a random query with a layer of window aggregates: over the base
// relation or over a first layer, sometimes under one more.
func (g *pdGen) overQuery(i int) pdQuery {
	rel := g.base()
	if x := g.r.Intn(4); rel.rawWindow || x < 2 {
		var first pdLayer
		switch {
		case rel.rawWindow || x == 0:
			first = g.aggLayer(rel)
		default:
			first = g.topnLayer(rel)
		}
		rel = first.wrap(rel, g.name("s"))
	}
	last := g.overLayer(rel)
	if g.r.Intn(3) == 0 {
		rel = last.wrap(rel, g.name("s"))
		if g.r.Intn(2) == 0 {
			last = g.aggLayer(rel)
		} else {
			last = g.filterLayer(rel)
		}
	}
	return pdQuery{name: fmt.Sprintf("w%03d", i), rsql: fmt.Sprintf(last.sel, rel.r), pg: fmt.Sprintf(last.sel, rel.p)}
}

// query generates one random query.
func (g *pdGen) query(i int) pdQuery {
	rel := g.base()
	layers := 1 + g.r.Intn(3)
	var last pdLayer
	for k := 0; k < layers; k++ {
		if k > 0 {
			rel = last.wrap(rel, g.name("s"))
		}
		switch x := g.r.Intn(10); {
		case rel.rawWindow || x < 5:
			last = g.aggLayer(rel)
		case x < 7:
			last = g.filterLayer(rel)
		case x < 8:
			last = g.distinctLayer(rel)
		default:
			last = g.topnLayer(rel)
		}
	}
	q := pdQuery{name: fmt.Sprintf("q%03d", i), rsql: fmt.Sprintf(last.sel, rel.r), pg: fmt.Sprintf(last.sel, rel.p)}
	if g.r.Intn(10) == 0 {
		var order []string
		for _, c := range last.cols {
			order = append(order, c.name)
		}
		tail := " ORDER BY " + strings.Join(order, ", ") + " LIMIT " + g.pick("3", "10")
		q.rsql, q.pg, q.ordered = q.rsql+tail, q.pg+tail, true
	}
	return q
}

// pdKnownWrongRandom are differences rsql has today, each recognised by the query and answers:
// a random query whose wrong answer one of them recognises is logged instead of failing.
var pdKnownWrongRandom = []struct {
	is  func(q pdQuery, o pdOutcome) bool
	why string
}{}

func pdRandomTest(t *testing.T, e *pdEnv) {
	n := 30
	if s := os.Getenv("RSQL_PGDIFF_N"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	g := &pdGen{r: rand.New(rand.NewSource(pdSeed()))}
	qs := make([]pdQuery, n)
	for i := range qs {
		qs[i] = g.query(i)
	}
	// Queries with window aggregates, from a generator of their own (the others stay as
	// they were for a seed).
	gw := &pdGen{r: rand.New(rand.NewSource(pdSeed() + 1))}
	for i := 0; i < n/2; i++ {
		qs = append(qs, gw.overQuery(i))
	}
	out := e.pdRun(qs)
	known := 0
	for i, q := range qs {
		o := out[i]
		if o.kind != pdWrong {
			continue
		}
		if strings.HasPrefix(o.detail, "PostgreSQL rejects") {
			t.Errorf("%s: the generator made a query PostgreSQL rejects:\n%s\n%s", q.name, q.pg, o.detail)
			continue
		}
		why := ""
		for _, k := range pdKnownWrongRandom {
			if k.is(q, o) {
				why = k.why
				break
			}
		}
		if why != "" && !pdStrict() {
			known++
			t.Logf("%s: known wrong (%s):\n%s\n%s", q.name, why, q.rsql, o.detail)
			continue
		}
		t.Errorf("%s: wrong answer to\n%s\nPostgreSQL dialect:\n%s\n%s", q.name, q.rsql, q.pg, o.detail)
	}
	if os.Getenv("RSQL_PGDIFF_LIST") != "" {
		for i, q := range qs {
			t.Logf("%s %s: %s", q.name, out[i].kind, q.rsql)
		}
	}
	reasons := map[string]int{}
	for _, o := range out {
		if o.kind == pdRefused {
			reasons[o.detail]++
		}
	}
	var why []string
	for r, c := range reasons {
		why = append(why, fmt.Sprintf("  %3d × %s", c, r))
	}
	sort.Strings(why)
	t.Logf("pgdiff random (seed %d, %d queries): %s, of them known wrong %d; refusals:\n%s", pdSeed(), len(qs), pdSummary(out), known, strings.Join(why, "\n"))
}
