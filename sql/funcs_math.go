package sql

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// float8 results: PostgreSQL raises 22003 when a finite computation overflows to infinity
// or underflows to zero; rsql makes that row's value an error.
func checkFloat(r float64, inputsInf bool, inputsNonZero bool) Value {
	if math.IsInf(r, 0) && !inputsInf {
		return ErrorValue(CodeNumericOutOfRange, "value out of range: overflow")
	}
	if r == 0 && inputsNonZero {
		return ErrorValue(CodeNumericOutOfRange, "value out of range: underflow")
	}
	return Double(r)
}

func doubleFn(name, sig, doc string, f func(x float64) Value) *FuncDef {
	return &FuncDef{Name: name, Sig: sig, Doc: doc, Group: "math",
		Check: func(args []Expr) (Type, []Expr, error) {
			if err := argCount(name, args, 1, 1); err != nil {
				return TypeNull, nil, err
			}
			a, err := doubleArg(name, args, 0)
			if err != nil {
				return TypeNull, nil, err
			}
			return TypeDouble, []Expr{a}, nil
		},
		Build: func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict1(args[0], func(v Value) Value { return f(v.F()) }), nil
		}}
}

// numOrDouble is the rule of SIGN, FLOOR, CEIL, ROUND(x) and TRUNC(x): NUMERIC for a
// NUMERIC argument, DOUBLE for integers and doubles (as PostgreSQL resolves them).
func numOrDouble(name string, onNum func(Value) Value, onDouble func(float64) float64) *FuncDef {
	return &FuncDef{Name: name, Group: "math",
		Check: func(args []Expr) (Type, []Expr, error) {
			if err := argCount(name, args, 1, 1); err != nil {
				return TypeNull, nil, err
			}
			if args[0].Type().Kind == KindDecimal {
				return TypeNumeric, args, nil
			}
			a, err := doubleArg(name, args, 0)
			if err != nil {
				return TypeNull, nil, err
			}
			return TypeDouble, []Expr{a}, nil
		},
		Build: func(c *Call, args []Evaluator) (Evaluator, error) {
			if c.T.Kind == KindDecimal {
				return strict1(args[0], onNum), nil
			}
			return strict1(args[0], func(v Value) Value { return Double(onDouble(v.F())) }), nil
		}}
}

// roundTrunc is ROUND / TRUNC: one argument as numOrDouble, two arguments over NUMERIC.
func roundTrunc(name string, trunc bool) *FuncDef {
	one := numOrDouble(name, func(v Value) Value { return NumericRound(v, 0, trunc) }, func(f float64) float64 {
		if trunc {
			return math.Trunc(f)
		}
		return math.RoundToEven(f)
	})
	d := &FuncDef{Name: name, Group: "math", Build: func(c *Call, args []Evaluator) (Evaluator, error) {
		if len(args) == 1 {
			return one.Build(c, args)
		}
		return strict2(args[0], args[1], func(x, y Value) Value { return NumericRound(x, y.I, trunc) }), nil
	}}
	d.Check = func(args []Expr) (Type, []Expr, error) {
		if len(args) == 1 {
			return one.Check(args)
		}
		if err := argCount(name, args, 1, 2); err != nil {
			return TypeNull, nil, err
		}
		x, err := numericArg(name, args, 0)
		if err != nil {
			return TypeNull, nil, err
		}
		n, err := intArg(name, args, 1)
		if err != nil {
			return TypeNull, nil, err
		}
		return TypeNumeric, []Expr{x, n}, nil
	}
	return d
}

func init() {
	sign := numOrDouble("SIGN", func(v Value) Value {
		if numericSpecial(v) {
			switch v.S {
			case "Infinity":
				return Value{K: KindDecimal, I: 1}
			case "-Infinity":
				return Value{K: KindDecimal, I: -1}
			}
			return v
		}
		return Value{K: KindDecimal, I: int64(NumericCompare(v, Value{K: KindDecimal}))}
	}, func(f float64) float64 {
		switch {
		case f > 0:
			return 1
		case f < 0:
			return -1
		}
		return 0
	})
	sign.Sig, sign.Doc = "SIGN(x)", "-1, 0 or 1; NUMERIC for NUMERIC, else DOUBLE"
	floor := numOrDouble("FLOOR", func(v Value) Value { return numericFloorCeil(v, false) }, math.Floor)
	floor.Sig, floor.Doc = "FLOOR(x)", "NUMERIC for NUMERIC (scale 0), else DOUBLE"
	ceil := numOrDouble("CEIL", func(v Value) Value { return numericFloorCeil(v, true) }, math.Ceil)
	ceil.Sig, ceil.Doc, ceil.Aliases = "CEIL(x)", "NUMERIC for NUMERIC (scale 0), else DOUBLE", []string{"CEILING"}
	round := roundTrunc("ROUND", false)
	round.Sig, round.Doc = "ROUND(x [, d])", "NUMERIC: half away from zero to d digits (d < 0 rounds left of the point: `ROUND(14.9, -1)` = 10); DOUBLE: half to even; `ROUND(x, d)` needs NUMERIC (or integer) x"
	trunc := roundTrunc("TRUNC", true)
	trunc.Sig, trunc.Doc = "TRUNC(x [, d])", "as ROUND, toward zero"
	register(sign, floor, ceil, round, trunc,
		&FuncDef{Name: "ABS", Sig: "ABS(x)", Group: "math", Doc: "the argument's type; ABS of the smallest INT/BIGINT is an error (22003)",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("ABS", args, 1, 1); err != nil {
					return TypeNull, nil, err
				}
				switch t := args[0].Type(); t.Kind {
				case KindInt, KindBigInt, KindDouble:
					return t, args, nil
				case KindDecimal:
					return TypeNumeric, args, nil
				case KindNull:
					return TypeDouble, []Expr{&Literal{V: Null, T: TypeDouble}}, nil
				}
				a, err := doubleArg("ABS", args, 0)
				return TypeDouble, []Expr{a}, err
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				k := c.T.Kind
				return strict1(args[0], func(v Value) Value {
					switch k {
					case KindDouble:
						return Double(math.Abs(v.F()))
					case KindDecimal:
						if v.S != "" {
							if v.S[0] == '-' {
								v.S = v.S[1:]
							}
							return v
						}
						if v.I < 0 {
							v.I = -v.I
						}
						return v
					}
					if v.I < 0 {
						if k == KindInt && v.I == math.MinInt32 || v.I == math.MinInt64 {
							return ErrorValue(CodeNumericOutOfRange, outOfRange(k))
						}
						v.I = -v.I
					}
					return v
				}), nil
			}},
		// PostgreSQL's div(numeric, numeric), integers converted to NUMERIC as PostgreSQL
		// does implicitly; also the operator a DIV b when an operand is NUMERIC (the binder
		// calls it; integers alone divide as integers there).
		&FuncDef{Name: "DIV", Sig: "DIV(a, b)", Group: "math", Doc: "`NUMERIC` quotient of a / b truncated toward zero, computed exactly (integers converted, as PostgreSQL's `div`); zero b is an error (22012)",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("DIV", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				for _, a := range args {
					if k := a.Type().Kind; !k.IsInteger() && k != KindDecimal && k != KindNull {
						return TypeNull, nil, noFunc("div", args)
					}
				}
				return TypeNumeric, args, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return strict2(args[0], args[1], NumericIntDiv), nil
			}},
		&FuncDef{Name: "MOD", Sig: "MOD(a, b)", Group: "math", Doc: "as `a % b`: the sign of a; zero b is an error (22012)",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("MOD", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				return callType("%", args)
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				cc := *c
				cc.Func = "%"
				return compileArith(&cc, args)
			}},
		doubleFn("SQRT", "SQRT(x)", "DOUBLE; x < 0 is an error (2201F)", func(x float64) Value {
			if x < 0 {
				return ErrorValue(CodeInvalidPowerArgument, "cannot take square root of a negative number")
			}
			return Double(math.Sqrt(x))
		}),
		doubleFn("CBRT", "CBRT(x)", "DOUBLE cube root", func(x float64) Value { return Double(math.Cbrt(x)) }),
		doubleFn("EXP", "EXP(x)", "DOUBLE; overflow or underflow is an error (22003)", func(x float64) Value {
			r := math.Exp(x)
			if math.IsNaN(x) {
				return Double(x)
			}
			return checkFloat(r, math.IsInf(x, 0), !math.IsInf(x, -1))
		}),
		doubleFn("LN", "LN(x)", "DOUBLE natural logarithm; x ≤ 0 is an error (2201E)", logFn(math.Log)),
		doubleFn("LOG10", "LOG10(x)", "DOUBLE base-10 logarithm", logFn(math.Log10)),
		&FuncDef{Name: "LOG", Sig: "LOG([b,] x)", Group: "math", Doc: "base-10 logarithm of x, or base b; DOUBLE",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("LOG", args, 1, 2); err != nil {
					return TypeNull, nil, err
				}
				out := make([]Expr, len(args))
				for i := range args {
					var err error
					if out[i], err = doubleArg("LOG", args, i); err != nil {
						return TypeNull, nil, err
					}
				}
				return TypeDouble, out, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				if len(args) == 1 {
					return strict1(args[0], func(v Value) Value { return logFn(math.Log10)(v.F()) }), nil
				}
				return strict2(args[0], args[1], func(b, x Value) Value {
					if b.F() <= 0 || x.F() <= 0 {
						return ErrorValue(CodeInvalidLogArgument, "cannot take logarithm of zero or a negative number")
					}
					if b.F() == 1 {
						return ErrorValue(CodeDivisionByZero, "division by zero")
					}
					return Double(math.Log(x.F()) / math.Log(b.F()))
				}), nil
			}},
		doubleFn("SIN", "SIN(x)", "DOUBLE, radians", trig(math.Sin)),
		doubleFn("COS", "COS(x)", "DOUBLE, radians", trig(math.Cos)),
		doubleFn("TAN", "TAN(x)", "DOUBLE, radians", trig(math.Tan)),
		doubleFn("ASIN", "ASIN(x)", "DOUBLE; |x| > 1 is an error (22003)", inverseTrig(math.Asin)),
		doubleFn("ACOS", "ACOS(x)", "DOUBLE; |x| > 1 is an error (22003)", inverseTrig(math.Acos)),
		doubleFn("ATAN", "ATAN(x)", "DOUBLE", func(x float64) Value { return Double(math.Atan(x)) }),
		doubleFn("DEGREES", "DEGREES(x)", "radians to degrees", func(x float64) Value { return Double(x * 180 / math.Pi) }),
		doubleFn("RADIANS", "RADIANS(x)", "degrees to radians", func(x float64) Value { return Double(x * math.Pi / 180) }),
		&FuncDef{Name: "ATAN2", Sig: "ATAN2(y, x)", Group: "math", Doc: "DOUBLE",
			Check: double2Check("ATAN2"),
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return strict2(args[0], args[1], func(y, x Value) Value { return Double(math.Atan2(y.F(), x.F())) }), nil
			}},
		&FuncDef{Name: "POWER", Aliases: []string{"POW"}, Sig: "POWER(a, b)", Group: "math", Doc: "DOUBLE; 0 to a negative power and a negative number to a fractional power are errors (2201F), overflow and underflow too (22003)",
			Check: double2Check("POWER"),
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return strict2(args[0], args[1], func(a, b Value) Value { return powerFloat(a.F(), b.F()) }), nil
			}},
		&FuncDef{Name: "PI", Sig: "PI()", Group: "math", Doc: "π",
			Check: func(args []Expr) (Type, []Expr, error) {
				return TypeDouble, nil, argCount("PI", args, 0, 0)
			},
			Build: func(*Call, []Evaluator) (Evaluator, error) {
				return func(Row) Value { return Double(math.Pi) }, nil
			}},
		&FuncDef{Name: "RANDOM", Sig: "RANDOM()", Group: "math", Volatile: true,
			Doc: "pseudo-random DOUBLE in [0, 1); each compiled query has its own generator seeded from the query's text, so a job re-run over the same input in the same order gives the same values",
			Check: func(args []Expr) (Type, []Expr, error) {
				return TypeDouble, nil, argCount("RANDOM", args, 0, 0)
			},
			Build: func(c *Call, _ []Evaluator) (Evaluator, error) {
				h := fnv.New64a()
				h.Write([]byte(c.String()))
				rng := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
				return func(Row) Value { return Double(rng.Float64()) }, nil
			}},
	)
}

func double2Check(name string) func(args []Expr) (Type, []Expr, error) {
	return func(args []Expr) (Type, []Expr, error) {
		if err := argCount(name, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		a, err := doubleArg(name, args, 0)
		if err != nil {
			return TypeNull, nil, err
		}
		b, err := doubleArg(name, args, 1)
		if err != nil {
			return TypeNull, nil, err
		}
		return TypeDouble, []Expr{a, b}, nil
	}
}

func logFn(f func(float64) float64) func(float64) Value {
	return func(x float64) Value {
		switch {
		case x == 0:
			return ErrorValue(CodeInvalidLogArgument, "cannot take logarithm of zero")
		case x < 0:
			return ErrorValue(CodeInvalidLogArgument, "cannot take logarithm of a negative number")
		}
		return Double(f(x))
	}
}

func trig(f func(float64) float64) func(float64) Value {
	return func(x float64) Value {
		if math.IsInf(x, 0) {
			return ErrorValue(CodeNumericOutOfRange, "input is out of range")
		}
		return Double(f(x))
	}
}

func inverseTrig(f func(float64) float64) func(float64) Value {
	return func(x float64) Value {
		if x < -1 || x > 1 {
			return ErrorValue(CodeNumericOutOfRange, "input is out of range")
		}
		return Double(f(x))
	}
}

// powerFloat is PostgreSQL's dpow.
func powerFloat(x, y float64) Value {
	if math.IsNaN(x) {
		if y == 0 {
			return Double(1)
		}
		return Double(x)
	}
	if math.IsNaN(y) {
		if x == 1 {
			return Double(1)
		}
		return Double(y)
	}
	if x == 0 && y < 0 {
		return ErrorValue(CodeInvalidPowerArgument, "zero raised to a negative power is undefined")
	}
	if x < 0 && y != math.Trunc(y) && !math.IsInf(y, 0) {
		return ErrorValue(CodeInvalidPowerArgument, "a negative number raised to a non-integer power yields a complex result")
	}
	if math.IsInf(y, 0) {
		ax := math.Abs(x)
		switch {
		case ax == 1:
			return Double(1)
		case (ax > 1) == (y > 0):
			return Double(math.Inf(1))
		}
		return Double(0)
	}
	r := math.Pow(x, y)
	return checkFloat(r, math.IsInf(x, 0), x != 0 && !math.IsInf(x, 0))
}

func numericFloorCeil(v Value, up bool) Value {
	if numericSpecial(v) {
		return v
	}
	t := NumericRound(v, 0, true)
	if t.IsError() {
		return t
	}
	c := NumericCompare(v, t)
	switch {
	case up && c > 0:
		return NumericAdd(t, BigInt(1))
	case !up && c < 0:
		return NumericSub(t, BigInt(1))
	}
	return t
}

func outOfRange(k Kind) string {
	switch k {
	case KindInt:
		return "integer out of range"
	case KindBigInt:
		return "bigint out of range"
	}
	return "value out of range"
}
