package sql

import (
	"slices"
	"strconv"
	"strings"
)

// The expression nodes. Every node is immutable; WithChildren returns a new node of the
// same kind with the given children (same count and order as Children). ColumnRef is the
// only node that reads the input row, so a planner that remaps row layouts rewrites
// ColumnRef indexes and nothing else.

// Literal is a constant.
type Literal struct {
	V Value
	T Type
}

// NewLiteral returns a literal whose type is the value's kind (DECIMAL keeps its scale
// with precision 18).
func NewLiteral(v Value) *Literal {
	t := Type{Kind: v.K}
	if v.K == KindDecimal {
		t.Precision, t.Scale = 18, v.Scale
	}
	return &Literal{V: v, T: t}
}

func (l *Literal) Type() Type                 { return l.T }
func (l *Literal) Children() []Expr           { return nil }
func (l *Literal) WithChildren(_ []Expr) Expr { return l }
func (l *Literal) String() string {
	switch l.V.K {
	case KindVarchar:
		return quoteString(l.V.S)
	case KindJSON:
		return "CAST(" + quoteString(l.V.S) + " AS JSON)"
	case KindTimestamp:
		return "TIMESTAMP " + quoteString(FormatTimestamp(l.V.I))
	case KindInterval:
		return formatInterval(l.V.I)
	}
	return l.V.String()
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// formatInterval renders milliseconds as INTERVAL 'n' UNIT with the largest exact unit.
func formatInterval(ms int64) string {
	units := []struct {
		name string
		ms   int64
	}{{"DAY", 86400000}, {"HOUR", 3600000}, {"MINUTE", 60000}, {"SECOND", 1000}}
	for _, u := range units {
		if ms != 0 && ms%u.ms == 0 {
			return "INTERVAL '" + strconv.FormatInt(ms/u.ms, 10) + "' " + u.name
		}
	}
	return "INTERVAL '" + strconv.FormatInt(ms, 10) + "' MILLISECOND"
}

// Call is an operator or a scalar function applied to Args. Func is upper case: the
// operators "+", "-", "*", "/", "%", "NEG", "=", "<>", "<", "<=", ">", ">=", "AND", "OR",
// "NOT", "||", "IS DISTINCT FROM", "IS NOT DISTINCT FROM", "REGEXP" (~), "IREGEXP" (~*),
// or the canonical name of a registered function (funcs.go; docs/sql.md lists them).
// EXTRACT's and DATE_PART's first argument is a VARCHAR literal naming the unit. Build
// calls with NewCall, which checks argument types, inserts implicit casts and computes T.
type Call struct {
	Func string
	Args []Expr
	T    Type
	// Def is the function of a call of a user-defined function (found through the
	// Catalog, not the registry); nil for built-ins.
	Def *FuncDef
}

func (c *Call) Type() Type       { return c.T }
func (c *Call) Children() []Expr { return c.Args }
func (c *Call) WithChildren(ch []Expr) Expr {
	n := *c
	n.Args = ch
	return &n
}

var infixOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "=": true, "<>": true,
	"<": true, "<=": true, ">": true, ">=": true, "AND": true, "OR": true, "||": true,
	"IS DISTINCT FROM": true, "IS NOT DISTINCT FROM": true, "REGEXP": true, "IREGEXP": true}

func (c *Call) String() string {
	switch {
	case infixOps[c.Func] && len(c.Args) == 2:
		op := c.Func
		switch op {
		case "REGEXP":
			op = "~"
		case "IREGEXP":
			op = "~*"
		}
		return "(" + c.Args[0].String() + " " + op + " " + c.Args[1].String() + ")"
	case c.Func == "NEG" && len(c.Args) == 1:
		return "-" + c.Args[0].String()
	case c.Func == "NOT" && len(c.Args) == 1:
		return "NOT " + c.Args[0].String()
	case c.Func == "EXTRACT" && len(c.Args) == 2:
		if l, ok := c.Args[0].(*Literal); ok {
			return "EXTRACT(" + l.V.S + " FROM " + c.Args[1].String() + ")"
		}
	}
	return c.Func + "(" + joinExprs(c.Args) + ")"
}

func joinExprs(es []Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}

// Case is CASE [Operand] WHEN Whens[i] THEN Thens[i] ... [ELSE Else] END. Operand and Else
// may be nil. Children are Operand (when set), then Whens and Thens interleaved, then Else
// (when set).
type Case struct {
	Operand Expr
	Whens   []Expr
	Thens   []Expr
	Else    Expr
	T       Type
}

func (c *Case) Type() Type { return c.T }
func (c *Case) Children() []Expr {
	var out []Expr
	if c.Operand != nil {
		out = append(out, c.Operand)
	}
	for i := range c.Whens {
		out = append(out, c.Whens[i], c.Thens[i])
	}
	if c.Else != nil {
		out = append(out, c.Else)
	}
	return out
}
func (c *Case) WithChildren(ch []Expr) Expr {
	n := &Case{T: c.T}
	i := 0
	if c.Operand != nil {
		n.Operand = ch[0]
		i = 1
	}
	for range c.Whens {
		n.Whens = append(n.Whens, ch[i])
		n.Thens = append(n.Thens, ch[i+1])
		i += 2
	}
	if c.Else != nil {
		n.Else = ch[i]
	}
	return n
}
func (c *Case) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	if c.Operand != nil {
		b.WriteString(" " + c.Operand.String())
	}
	for i := range c.Whens {
		b.WriteString(" WHEN " + c.Whens[i].String() + " THEN " + c.Thens[i].String())
	}
	if c.Else != nil {
		b.WriteString(" ELSE " + c.Else.String())
	}
	b.WriteString(" END")
	return b.String()
}

// Cast converts Arg to T.
type Cast struct {
	Arg Expr
	T   Type
}

func (c *Cast) Type() Type                  { return c.T }
func (c *Cast) Children() []Expr            { return []Expr{c.Arg} }
func (c *Cast) WithChildren(ch []Expr) Expr { return &Cast{Arg: ch[0], T: c.T} }
func (c *Cast) String() string              { return "CAST(" + c.Arg.String() + " AS " + c.T.String() + ")" }

// In is Arg [NOT] IN (List...). Children are Arg then List.
type In struct {
	Arg  Expr
	List []Expr
	Not  bool
}

func (n *In) Type() Type       { return TypeBool }
func (n *In) Children() []Expr { return append([]Expr{n.Arg}, n.List...) }
func (n *In) WithChildren(ch []Expr) Expr {
	return &In{Arg: ch[0], List: append([]Expr(nil), ch[1:]...), Not: n.Not}
}
func (n *In) String() string {
	op := " IN ("
	if n.Not {
		op = " NOT IN ("
	}
	return n.Arg.String() + op + joinExprs(n.List) + ")"
}

// Between is Arg [NOT] BETWEEN Lo AND Hi (inclusive).
type Between struct {
	Arg, Lo, Hi Expr
	Not         bool
}

func (n *Between) Type() Type       { return TypeBool }
func (n *Between) Children() []Expr { return []Expr{n.Arg, n.Lo, n.Hi} }
func (n *Between) WithChildren(ch []Expr) Expr {
	return &Between{Arg: ch[0], Lo: ch[1], Hi: ch[2], Not: n.Not}
}
func (n *Between) String() string {
	op := " BETWEEN "
	if n.Not {
		op = " NOT BETWEEN "
	}
	return "(" + n.Arg.String() + op + n.Lo.String() + " AND " + n.Hi.String() + ")"
}

// Like is Arg [NOT] LIKE Pattern: % matches any run of characters, _ one character, and
// Escape (default '\\') makes the next pattern character literal. A constant pattern is
// compiled once.
type Like struct {
	Arg, Pattern Expr
	Escape       rune
	Not          bool
}

func (n *Like) Type() Type       { return TypeBool }
func (n *Like) Children() []Expr { return []Expr{n.Arg, n.Pattern} }
func (n *Like) WithChildren(ch []Expr) Expr {
	return &Like{Arg: ch[0], Pattern: ch[1], Escape: n.Escape, Not: n.Not}
}
func (n *Like) String() string {
	op := " LIKE "
	if n.Not {
		op = " NOT LIKE "
	}
	return "(" + n.Arg.String() + op + n.Pattern.String() + ")"
}

// IsNull is Arg IS [NOT] NULL.
type IsNull struct {
	Arg Expr
	Not bool
}

func (n *IsNull) Type() Type                  { return TypeBool }
func (n *IsNull) Children() []Expr            { return []Expr{n.Arg} }
func (n *IsNull) WithChildren(ch []Expr) Expr { return &IsNull{Arg: ch[0], Not: n.Not} }
func (n *IsNull) String() string {
	if n.Not {
		return "(" + n.Arg.String() + " IS NOT NULL)"
	}
	return "(" + n.Arg.String() + " IS NULL)"
}

// Walk calls fn on e and, while fn returns true, on its descendants (pre-order).
func Walk(e Expr, fn func(Expr) bool) {
	if e == nil || !fn(e) {
		return
	}
	for _, c := range e.Children() {
		Walk(c, fn)
	}
}

// Transform rebuilds e bottom-up: children first, then fn on the node with its new
// children. fn returns the replacement (or the node itself).
func Transform(e Expr, fn func(Expr) (Expr, error)) (Expr, error) {
	if e == nil {
		return nil, nil
	}
	ch := e.Children()
	if len(ch) > 0 {
		nc := make([]Expr, len(ch))
		changed := false
		for i, c := range ch {
			n, err := Transform(c, fn)
			if err != nil {
				return nil, err
			}
			nc[i] = n
			changed = changed || n != c
		}
		if changed {
			e = e.WithChildren(nc)
		}
	}
	return fn(e)
}

// ColumnsUsed returns the distinct ColumnRef indexes read by e, in first-use order.
func ColumnsUsed(e Expr) []int {
	var out []int
	seen := map[int]bool{}
	Walk(e, func(x Expr) bool {
		if c, ok := x.(*ColumnRef); ok && !seen[c.Index] {
			seen[c.Index] = true
			out = append(out, c.Index)
		}
		return true
	})
	return out
}

// RemapColumns returns e with every ColumnRef index i replaced by m[i]; it fails when an
// index has no entry (m[i] < 0 or i out of range).
func RemapColumns(e Expr, m []int) (Expr, error) {
	return Transform(e, func(x Expr) (Expr, error) {
		c, ok := x.(*ColumnRef)
		if !ok {
			return x, nil
		}
		if c.Index < 0 || c.Index >= len(m) || m[c.Index] < 0 {
			return nil, Errorf(CodeInternal, "column %s (#%d) is not available", c.Name, c.Index)
		}
		return &ColumnRef{Index: m[c.Index], Name: c.Name, T: c.T}, nil
	})
}

// SameExpr reports whether a and b are the same expression: the same text (String) over
// the same columns (by place: a column's name, which String shows, is not unique in a
// join's row).
func SameExpr(a, b Expr) bool {
	if a.String() != b.String() {
		return false
	}
	var cols [2][]int
	for i, e := range []Expr{a, b} {
		Walk(e, func(x Expr) bool {
			if c, ok := x.(*ColumnRef); ok {
				cols[i] = append(cols[i], c.Index)
			}
			return true
		})
	}
	return slices.Equal(cols[0], cols[1])
}

// IsConstant reports whether e reads no column and calls no volatile function (NOW(),
// RANDOM()).
func IsConstant(e Expr) bool {
	ok := true
	Walk(e, func(x Expr) bool {
		switch n := x.(type) {
		case *ColumnRef:
			ok = false
		case *Call:
			if volatileCall(n) {
				ok = false
			}
		}
		return ok
	})
	return ok
}

// String names the window kind as in SQL: TUMBLE, HOP or SESSION.
func (k WindowKind) String() string {
	switch k {
	case WindowTumble:
		return "TUMBLE"
	case WindowHop:
		return "HOP"
	case WindowSession:
		return "SESSION"
	case WindowGiven:
		return "WINDOW"
	}
	return "NONE"
}
