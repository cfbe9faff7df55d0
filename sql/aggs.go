package sql

import (
	"math/big"
	"sort"
	"strings"
)

// AggDef is one aggregate function: everything about it lives here — its name, its type
// rule (argument checking, implicit casts, result type), the constructor of the
// accumulator code that runs it, and its line in docs/sql.md's aggregate table (which a
// test keeps equal to AggregateTable()). The built-ins register themselves in this file;
// user-defined aggregates (CREATE AGGREGATE) are found through the Catalog
// (FuncCatalog) and carry User.
type AggDef struct {
	Name string // canonical name, upper case (user aggregates: as declared)
	Sig  string // the calls as documented, e.g. "COUNT(*), COUNT(x), COUNT(DISTINCT x)"
	Arg  string // the argument column of the docs table
	Doc  string // the result column of the docs table (Markdown)
	// Star: the aggregate takes * (COUNT(*)); Distinct: it takes DISTINCT.
	Star, Distinct bool
	// Check validates the bound arguments and returns the result type and the arguments
	// to keep (possibly wrapped in implicit casts). It is not called for COUNT(*).
	// Errors are *Error (42804, 42883, 0A000).
	Check func(args []Expr, distinct bool) (Type, []Expr, error)
	// New builds the Aggregator of one call (typed by Check). The planner calls it once
	// per compiled plan, so each stage has its own.
	New func(c AggCall) (Aggregator, error)
	// User marks a user-defined aggregate; CanRetract one that can take a row back (a
	// JavaScript aggregate whose body defines retract).
	User, CanRetract bool
}

// Retractable reports whether the aggregate can take back a row it has counted, so that it
// can run over an updating input (docs/sql.md, "Changelogs"): the built-ins can (COUNT,
// SUM and AVG by subtraction, Retracter; the others by keeping each group's values);
// a user aggregate when it defines retract (CanRetract).
func (d *AggDef) Retractable(AggCall) bool { return !d.User || d.CanRetract }

// Retracter is implemented by aggregators that take a row back by undoing its Add (COUNT,
// SUM, AVG): Retract(s, args) leaves s as if the Add of args had not happened.
type Retracter interface {
	Retract(s *AggState, args []Value) *Error
}

// ValueSetAggregator is implemented by the aggregators that cannot undo an Add but whose
// result depends only on which values were added, not how often (MIN, MAX,
// COUNT(DISTINCT)): over an updating input the executor keeps each group's multiset of
// argument values and Adds each distinct value once; when the last copy of a value v goes
// it calls Forget(s, v), which takes v out of s when it can and reports whether it did
// (false: s must be rebuilt from the values left, e.g. a MIN losing its minimum).
// Aggregators that implement neither this nor Retracter are rebuilt by Adding every value
// as often as it occurs, after every retraction.
type ValueSetAggregator interface {
	Forget(s *AggState, v Value) bool
}

// AggState is the state of one aggregate call in one group. Every aggregate keeps its
// state in these fields (the built-ins: N rows, I and F integer and float sums, V a
// value, Set the distinct values of a DISTINCT aggregate); the state codec of the executor
// stores N, I, F, V and Set and nothing else, so an aggregate whose working form is
// something else (Obj) writes it into them in Encode and reads it back in Decode.
type AggState struct {
	N   int64
	I   int64
	F   float64
	V   Value
	Set *DistinctSet
	// Obj is an aggregate's in-memory working state (a user aggregate's script value);
	// it is never stored.
	Obj any
}

// Aggregator runs one aggregate call. It is used by one goroutine (the stage's).
type Aggregator interface {
	// Add folds one row's argument values (none for COUNT(*)) into s. A non-nil error
	// fails the row (it goes to the bad-record path) and leaves s as it was.
	Add(s *AggState, args []Value) *Error
	// Merge folds src into dst (session windows that a row bridges). A failure is kept
	// in dst: its Result is then the error value.
	Merge(dst, src *AggState)
	// Result is the aggregate's value over s (an error value when it cannot be computed).
	Result(s *AggState) Value
	// Encode writes the working state into the stored fields before s is saved; Decode
	// reads it back after s was loaded. Errors there fail the checkpoint or the restore.
	Encode(s *AggState) error
	Decode(s *AggState) error
}

// AggFields is a set of the fields of AggState.
type AggFields uint8

// The fields of AggState.
const (
	AggN AggFields = 1 << iota
	AggI
	AggF
	AggV
	AggSet
	AggObj
	AggAll = AggN | AggI | AggF | AggV | AggSet | AggObj
)

// FieldUser is implemented by aggregators that use only some of AggState's fields: the
// others stay zero through Add and Merge (adding zeros keeps them zero), so an executor
// need not keep them for every group.
type FieldUser interface {
	AggFields() AggFields
}

// FieldsOf returns the fields of AggState that a uses (FieldUser); all of them for
// aggregators that do not say.
func FieldsOf(a Aggregator) AggFields {
	if f, ok := a.(FieldUser); ok {
		return f.AggFields()
	}
	return AggAll
}

// ExactMerger is implemented by aggregators whose Merge gives exactly the state that
// adding the rows of both states one by one would (counts, integer and decimal sums,
// MIN/MAX, distinct sets; not floating-point sums, whose rounding depends on the order of
// additions). args are the argument types of the call. Hop windows fold each row into one
// pane and merge a window's panes when it closes only when every aggregate merges exactly,
// so a window's result does not depend on how it was computed.
type ExactMerger interface {
	MergesExactly(args []Type) bool
}

// MergesExactly reports whether a's Merge is exact for arguments of types args
// (ExactMerger); false for aggregators that do not say.
func MergesExactly(a Aggregator, args []Type) bool {
	m, ok := a.(ExactMerger)
	return ok && m.MergesExactly(args)
}

// ArgList is the argument of an aggregate call with more than one argument
// (AggCall.Arg): the arguments in order. It is not a value and does not compile; rewrites
// see the arguments as its children.
type ArgList struct{ Items []Expr }

func (l *ArgList) Type() Type       { return TypeNull }
func (l *ArgList) Children() []Expr { return l.Items }
func (l *ArgList) WithChildren(ch []Expr) Expr {
	return &ArgList{Items: ch}
}
func (l *ArgList) String() string {
	s := make([]string, len(l.Items))
	for i, e := range l.Items {
		s[i] = e.String()
	}
	return strings.Join(s, ", ")
}

// Args returns the call's arguments: none for COUNT(*), else Arg, or the items of an
// ArgList.
func (c AggCall) Args() []Expr {
	switch a := c.Arg.(type) {
	case nil:
		return nil
	case *ArgList:
		return a.Items
	}
	return []Expr{c.Arg}
}

// Aggregate returns the definition of the call: Def, or the built-in of its name.
func (c AggCall) Aggregate() (*AggDef, bool) {
	if c.Def != nil {
		return c.Def, true
	}
	return LookupAgg(c.Func)
}

// argsExpr is the AggCall.Arg form of args.
func argsExpr(args []Expr) Expr {
	switch len(args) {
	case 0:
		return nil
	case 1:
		return args[0]
	}
	return &ArgList{Items: args}
}

var aggRegistry = map[string]*AggDef{}

// registerAgg adds aggregate definitions; a name given twice is a programming error.
func registerAgg(defs ...*AggDef) {
	for _, d := range defs {
		if _, dup := aggRegistry[d.Name]; dup {
			panic("sql: aggregate " + d.Name + " registered twice")
		}
		aggRegistry[d.Name] = d
	}
}

// LookupAgg returns the built-in aggregate called name (case-insensitive).
func LookupAgg(name string) (*AggDef, bool) {
	d, ok := aggRegistry[strings.ToUpper(name)]
	return d, ok
}

// Aggs returns the built-in aggregates ordered by name.
func Aggs() []*AggDef {
	out := make([]*AggDef, 0, len(aggRegistry))
	for _, d := range aggRegistry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AggregateTable renders the built-in aggregates as docs/sql.md's aggregate table.
func AggregateTable() string {
	var b strings.Builder
	b.WriteString("| aggregate | argument | result |\n|---|---|---|\n")
	for _, d := range Aggs() {
		sigs := strings.Split(d.Sig, ", ")
		for i := range sigs {
			sigs[i] = mdCode(sigs[i])
		}
		b.WriteString("| " + strings.Join(sigs, ", ") + " | " + d.Arg + " | " + d.Doc + " |\n")
	}
	return b.String()
}

// BindAggCall types a call of aggregate d over the bound args (nil for COUNT(*)) and
// returns it ready for the planner. It is what the binder does for every aggregate call.
func BindAggCall(d *AggDef, args []Expr, distinct, star bool) (AggCall, error) {
	c := AggCall{Func: d.Name, Distinct: distinct, Star: star, Def: d}
	if distinct && !d.Distinct {
		return c, Errorf(CodeNotSupported, "%s(DISTINCT ...) is not supported; only COUNT(DISTINCT x) is", d.Name)
	}
	if star {
		if !d.Star {
			return c, typeMismatch("%s(*) is not an aggregate: name its argument", d.Name)
		}
		c.T = TypeBigInt
		return c, nil
	}
	t, args, err := d.Check(args, distinct)
	if err != nil {
		return c, err
	}
	c.T, c.Arg = t, argsExpr(args)
	return c, nil
}

// cloneValue copies a value's string so that state never aliases a decoder's buffer.
func cloneValue(v Value) Value {
	if v.S != "" {
		v.S = strings.Clone(v.S)
	}
	return v
}

// oneArg checks that an aggregate has exactly one argument.
func oneArg(fn string, args []Expr) error {
	if len(args) != 1 {
		return Errorf(CodeSyntax, "%s takes one argument", fn)
	}
	return nil
}

// ---- the built-in aggregates ----

func init() {
	registerAgg(
		&AggDef{Name: "COUNT", Sig: "COUNT(*), COUNT(x), COUNT(DISTINCT x)", Arg: "any",
			Doc: "`BIGINT` (NULLs not counted by `COUNT(x)`)", Star: true, Distinct: true,
			Check: func(args []Expr, _ bool) (Type, []Expr, error) {
				if err := oneArg("COUNT", args); err != nil {
					return TypeNull, nil, err
				}
				return TypeBigInt, args, nil
			},
			New: func(c AggCall) (Aggregator, error) {
				switch {
				case c.Star || c.Arg == nil:
					return countStar{}, nil
				case c.Distinct:
					return &countDistinct{}, nil
				}
				return count{}, nil
			}},
		&AggDef{Name: "SUM", Sig: "SUM(x)", Arg: "numeric",
			Doc: "`BIGINT` for `SMALLINT`/`INT`, `NUMERIC` for `BIGINT` (exact, any size, as PostgreSQL), `DOUBLE`, or `NUMERIC`",
			Check: func(args []Expr, _ bool) (Type, []Expr, error) {
				if err := oneArg("SUM", args); err != nil {
					return TypeNull, nil, err
				}
				t := args[0].Type()
				switch {
				case !isNumOrNull(t.Kind):
					return TypeNull, nil, typeMismatch("SUM needs a numeric argument, not %s", t)
				case t.Kind == KindDouble:
					return TypeDouble, args, nil
				case t.Kind == KindDecimal && t.Precision == 0:
					return TypeNumeric, args, nil // the sum keeps the values' scales
				case t.Kind == KindDecimal:
					return Type{Kind: KindDecimal, Precision: 18, Scale: t.Scale}, args, nil
				case t.Kind == KindBigInt:
					// As PostgreSQL: the sum of BIGINTs is NUMERIC, exact past 2⁶³.
					return TypeNumeric, args, nil
				}
				return TypeBigInt, args, nil
			},
			New: func(c AggCall) (Aggregator, error) { return sum{t: c.T.Kind, ints: integerArg(c)}, nil }},
		&AggDef{Name: "AVG", Sig: "AVG(x)", Arg: "numeric", Doc: "`DOUBLE`",
			Check: func(args []Expr, _ bool) (Type, []Expr, error) {
				if err := oneArg("AVG", args); err != nil {
					return TypeNull, nil, err
				}
				if t := args[0].Type(); !isNumOrNull(t.Kind) {
					return TypeNull, nil, typeMismatch("AVG needs a numeric argument, not %s", t)
				}
				return TypeDouble, args, nil
			},
			New: func(c AggCall) (Aggregator, error) { return sum{avg: true, t: KindDouble, ints: integerArg(c)}, nil }},
		&AggDef{Name: "MIN", Sig: "MIN(x)", Arg: "any but JSON", Doc: "the argument's type",
			Check: minMaxCheck("MIN"), New: func(AggCall) (Aggregator, error) { return extreme{sign: -1}, nil }},
		&AggDef{Name: "MAX", Sig: "MAX(x)", Arg: "any but JSON", Doc: "the argument's type",
			Check: minMaxCheck("MAX"), New: func(AggCall) (Aggregator, error) { return extreme{sign: 1}, nil }},
	)
}

func minMaxCheck(fn string) func([]Expr, bool) (Type, []Expr, error) {
	return func(args []Expr, _ bool) (Type, []Expr, error) {
		if err := oneArg(fn, args); err != nil {
			return TypeNull, nil, err
		}
		t := args[0].Type()
		switch t.Kind {
		case KindJSON:
			return TypeNull, nil, typeMismatch("%s of JSON is not supported", fn)
		case KindNull:
			return TypeBigInt, args, nil
		}
		return t, args, nil
	}
}

// builtin holds the no-op Encode/Decode of the built-ins, whose working state is the
// stored fields.
type builtin struct{}

func (builtin) Encode(*AggState) error { return nil }
func (builtin) Decode(*AggState) error { return nil }

// mergeCounts adds src's counters to dst's.
func mergeCounts(dst, src *AggState) {
	dst.N += src.N
	dst.I += src.I
	dst.F += src.F
}

// countStar is COUNT(*): N rows.
type countStar struct{ builtin }

func (countStar) Add(s *AggState, _ []Value) *Error     { s.N++; return nil }
func (countStar) Merge(d, s *AggState)                  { mergeCounts(d, s) }
func (countStar) Result(s *AggState) Value              { return BigInt(s.N) }
func (countStar) MergesExactly([]Type) bool             { return true }
func (countStar) AggFields() AggFields                  { return AggN }
func (countStar) Retract(s *AggState, _ []Value) *Error { s.N--; return nil }

// count is COUNT(x): N non-NULL values.
type count struct{ builtin }

func (count) Add(s *AggState, a []Value) *Error {
	if a[0].K != KindNull {
		s.N++
	}
	return nil
}
func (count) Merge(d, s *AggState)      { mergeCounts(d, s) }
func (count) Result(s *AggState) Value  { return BigInt(s.N) }
func (count) MergesExactly([]Type) bool { return true }
func (count) AggFields() AggFields      { return AggN }

func (count) Retract(s *AggState, a []Value) *Error {
	if a[0].K != KindNull {
		s.N--
	}
	return nil
}

// countDistinct is COUNT(DISTINCT x): the distinct non-NULL values in Set.
type countDistinct struct{ builtin }

func (c *countDistinct) Add(s *AggState, a []Value) *Error {
	if a[0].K == KindNull {
		return nil
	}
	if s.Set == nil {
		s.Set = &DistinctSet{}
	}
	s.Set.Add(a[0])
	return nil
}

func (c *countDistinct) Merge(d, s *AggState) {
	if s.Set.Len() > 0 {
		if d.Set == nil {
			d.Set = &DistinctSet{}
		}
		d.Set.AddSet(s.Set)
	}
	mergeCounts(d, s)
}

func (c *countDistinct) Result(s *AggState) Value  { return BigInt(int64(s.Set.Len())) }
func (c *countDistinct) MergesExactly([]Type) bool { return true }
func (c *countDistinct) AggFields() AggFields      { return AggN | AggSet }

// Forget takes v out of the distinct values.
func (c *countDistinct) Forget(s *AggState, v Value) bool { return s.Set.Remove(v) }

// sum is SUM(x) and AVG(x): N values, their sum in I (integers), F (DOUBLE) or V
// (NUMERIC, exact at any scale). t is the result kind. An integer sum never wraps: it is
// the 128-bit I + F·2⁶⁴, F counting the carries out of I (an integer below 2⁵³ in
// magnitude, so a float holds it exactly), and SUM's result is 22003 when it does not fit
// a BIGINT (AVG's is the quotient of the whole sum).
type sum struct {
	builtin
	avg bool
	t   Kind
	// ints: the argument is an integer (F counts the carries of I)
	ints bool
}

// integerArg reports whether the call's argument is an integer.
func integerArg(c AggCall) bool {
	args := c.Args()
	return len(args) == 1 && args[0].Type().Kind.IsInteger()
}

// intSumNumeric is the NUMERIC value of the 128-bit integer sum of s (I, F carries of
// 2⁶⁴): SUM of BIGINT, as PostgreSQL computes it.
func intSumNumeric(s *AggState) Value {
	if s.F == 0 {
		return Decimal(s.I, 0)
	}
	t := new(big.Int).SetInt64(int64(s.F))
	t.Lsh(t, 64)
	t.Add(t, big.NewInt(s.I))
	v, ok := NumericFromString(t.String())
	if !ok {
		return ErrorValue(CodeNumericOutOfRange, "numeric out of range")
	}
	return v
}

// addCarry adds x to the 128-bit integer sum of s (I, F carries of 2⁶⁴).
func addCarry(s *AggState, x int64) {
	r := s.I + x
	if (s.I^r)&(x^r) < 0 { // signed overflow: r wrapped by 2⁶⁴
		if x > 0 {
			s.F++
		} else {
			s.F--
		}
	}
	s.I = r
}

// subCarry subtracts x from the 128-bit integer sum of s.
func subCarry(s *AggState, x int64) {
	r := s.I - x
	if (s.I^x)&(s.I^r) < 0 {
		if x < 0 {
			s.F++
		} else {
			s.F--
		}
	}
	s.I = r
}

func (sum) Add(s *AggState, a []Value) *Error {
	v := a[0]
	if v.K == KindNull {
		return nil
	}
	s.N++
	switch v.K {
	case KindDouble:
		s.F += v.F()
	case KindDecimal:
		if s.V.K != KindDecimal {
			s.V = v
		} else {
			s.V = NumericAdd(s.V, v)
		}
		s.V = cloneValue(s.V)
	default:
		addCarry(s, v.I)
	}
	return nil
}

// Retract takes one value back (an updating input's delete).
func (sum) Retract(s *AggState, a []Value) *Error {
	v := a[0]
	if v.K == KindNull {
		return nil
	}
	s.N--
	switch v.K {
	case KindDouble:
		s.F -= v.F()
	case KindDecimal:
		if s.V.K != KindDecimal {
			s.V = Decimal(0, 0)
		}
		s.V = cloneValue(NumericSub(s.V, v))
	default:
		subCarry(s, v.I)
	}
	return nil
}

func (sum) AggFields() AggFields { return AggN | AggI | AggF | AggV }

func (sum) Merge(d, s *AggState) {
	if s.V.K == KindDecimal {
		if d.V.K == KindDecimal {
			d.V = cloneValue(NumericAdd(d.V, s.V))
		} else {
			d.V = s.V
		}
	}
	d.N += s.N
	d.F += s.F
	addCarry(d, s.I)
}

// MergesExactly: integer and decimal sums are exact; a DOUBLE sum's rounding depends on
// the order of its additions.
func (sum) MergesExactly(args []Type) bool {
	for _, t := range args {
		if t.Kind != KindInt && t.Kind != KindBigInt && t.Kind != KindDecimal {
			return false
		}
	}
	return true
}

// two64 is 2⁶⁴, the weight of an integer sum's carries.
const two64 = 18446744073709551616.0

func (a sum) Result(s *AggState) Value {
	if s.N <= 0 {
		return Null
	}
	var total float64
	switch {
	case a.ints && !a.avg && a.t == KindDecimal:
		return intSumNumeric(s)
	case a.ints:
		if !a.avg && s.F != 0 {
			return ErrorValue(CodeNumericOutOfRange, "bigint out of range")
		}
		total = s.F*two64 + float64(s.I)
	case s.V.K == KindDecimal:
		total = s.F + s.V.AsFloat()
	default:
		total = s.F + float64(s.I)
	}
	if a.avg {
		return Double(total / float64(s.N))
	}
	switch a.t {
	case KindDouble:
		return Double(total)
	case KindDecimal:
		if s.V.K != KindDecimal {
			return Decimal(0, 0)
		}
		return s.V
	case KindInt:
		return Int(s.I)
	}
	return BigInt(s.I)
}

// extreme is MIN (sign -1) and MAX (sign 1): the value in V, N values seen.
type extreme struct {
	builtin
	sign int
}

func (e extreme) Add(s *AggState, a []Value) *Error {
	v := a[0]
	if v.K == KindNull {
		return nil
	}
	if s.N == 0 || Compare(v, s.V)*e.sign > 0 {
		s.V = cloneValue(v)
	}
	s.N++
	return nil
}

func (e extreme) Merge(d, s *AggState) {
	if s.N > 0 && (d.N == 0 || Compare(s.V, d.V)*e.sign > 0) {
		d.V = s.V
	}
	mergeCounts(d, s)
}

func (extreme) MergesExactly([]Type) bool { return true }

// Forget: a value other than the extreme leaves it as it is; the extreme's going needs the
// values left.
func (extreme) Forget(s *AggState, v Value) bool { return s.N > 0 && Compare(v, s.V) != 0 }
func (extreme) AggFields() AggFields             { return AggN | AggV }

func (extreme) Result(s *AggState) Value {
	if s.N == 0 {
		return Null
	}
	return s.V
}
