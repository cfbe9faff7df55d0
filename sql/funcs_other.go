package sql

import (
	"strconv"
	"strings"
)

func init() {
	register(
		&FuncDef{Nulls: NullConsumes, Name: "COALESCE", Aliases: []string{"IFNULL"}, Sig: "COALESCE(a, b, ...)", Group: "conditional",
			Doc:   "the first non-NULL argument; later arguments are not evaluated",
			Check: func(args []Expr) (Type, []Expr, error) { return unifyArgs("COALESCE", args, 1) },
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return func(r Row) Value {
					for _, f := range args {
						if v := f(r); v.K != KindNull || v.S != "" {
							return v
						}
					}
					return Null
				}, nil
			}},
		&FuncDef{Nulls: NullFirstArg, Name: "NULLIF", Sig: "NULLIF(a, b)", Group: "conditional", Doc: "NULL when a = b, else a",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("NULLIF", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				_, out, err := sameTypeArgs("NULLIF", args)
				if err != nil {
					return TypeNull, nil, err
				}
				return args[0].Type(), []Expr{args[0], out[1]}, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				a, b := args[0], args[1]
				return func(r Row) Value {
					x, y := a(r), b(r)
					if x.K == KindNull || y.K == KindNull {
						if y.IsError() {
							return y
						}
						return x
					}
					if Compare(x, y) == 0 {
						return Null
					}
					return x
				}, nil
			}},
		greatestLeast("GREATEST", 1), greatestLeast("LEAST", -1),
		&FuncDef{Name: "JSON_EXTRACT", Sig: "JSON_EXTRACT(j, path)", Group: "json",
			Doc:   "JSON at a MySQL path (`$`, `.key`, `.\"quoted key\"`, `[n]`), NULL when missing; `j->'$.a'` is the same",
			Check: jsonPathCheck("JSON_EXTRACT", TypeJSON),
			Build: buildJSONGet(false)},
		&FuncDef{Name: "JSON_UNQUOTE", Sig: "JSON_UNQUOTE(j)", Group: "json", Doc: "the text of a JSON string (other values as JSON text); JSON null gives NULL",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("JSON_UNQUOTE", args, 1, 1); err != nil {
					return TypeNull, nil, err
				}
				if !isStrOrNull(args[0].Type().Kind) {
					return TypeNull, nil, noFunc("JSON_UNQUOTE", args)
				}
				return TypeVarchar, args, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return strict1(args[0], func(v Value) Value {
					s, ok := jsonUnquote(v.S)
					if !ok {
						return Null
					}
					return Varchar(s)
				}), nil
			}},
		&FuncDef{Bind: bindJSONGet, Name: "JSON_GET", Sig: "j -> key, j -> n", Group: "json", Hidden: false,
			Doc:   "PostgreSQL's `->`: the member key of an object or element n of an array (n < 0 from the end) as JSON, NULL when missing; a key starting with `$` is a MySQL path",
			Check: jsonPathCheck("JSON_GET", TypeJSON),
			Build: buildJSONGet(false)},
		&FuncDef{Bind: bindJSONGet, Name: "JSON_GET_TEXT", Sig: "j ->> key, j ->> n", Group: "json",
			Doc:   "`->` as text: a JSON string unquoted, JSON null as NULL",
			Check: jsonPathCheck("JSON_GET_TEXT", TypeVarchar),
			Build: buildJSONGet(true)},
		&FuncDef{Name: "JSON_EXTRACT_PATH", Aliases: []string{"JSONB_EXTRACT_PATH"}, Sig: "JSON_EXTRACT_PATH(j, key, ...)", Group: "json",
			Doc:   "`j -> key1 -> key2 ...` (a key that is an integer indexes an array)",
			Check: jsonPathVariadic("JSON_EXTRACT_PATH", TypeJSON),
			Build: buildJSONPath(false)},
		&FuncDef{Name: "JSON_EXTRACT_PATH_TEXT", Aliases: []string{"JSONB_EXTRACT_PATH_TEXT"}, Sig: "JSON_EXTRACT_PATH_TEXT(j, key, ...)", Group: "json",
			Doc:   "`j -> key1 ... ->> keyN`, on a JSON or VARCHAR value",
			Check: jsonPathVariadic("JSON_EXTRACT_PATH_TEXT", TypeVarchar),
			Build: buildJSONPath(true)},
	)
}

// unifyArgs checks that args (at least min) have a common type and converts them to it.
func unifyArgs(fn string, args []Expr, min int) (Type, []Expr, error) {
	if err := argCount(fn, args, min, -1); err != nil {
		return TypeNull, nil, err
	}
	return sameTypeArgs(fn, args)
}

func greatestLeast(name string, sign int) *FuncDef {
	return &FuncDef{Nulls: NullConsumes, Name: name, Sig: name + "(a, b, ...)", Group: "conditional",
		Doc:   map[int]string{1: "the largest non-NULL argument (NULL if all are)", -1: "the smallest non-NULL argument"}[sign],
		Check: func(args []Expr) (Type, []Expr, error) { return unifyArgs(name, args, 1) },
		Build: func(c *Call, args []Evaluator) (Evaluator, error) {
			return func(r Row) Value {
				best := Null
				for _, f := range args {
					v := f(r)
					if v.K == KindNull {
						if v.S != "" {
							return v
						}
						continue
					}
					if best.K == KindNull || Compare(v, best)*sign > 0 {
						best = v
					}
				}
				return best
			}, nil
		}}
}

// jsonPathCheck types JSON_EXTRACT(j, path) and j -> key / j ->> key: the document is
// JSON or VARCHAR, the key a constant string or integer.
func jsonPathCheck(name string, result Type) func(args []Expr) (Type, []Expr, error) {
	return func(args []Expr) (Type, []Expr, error) {
		if err := argCount(name, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		if !isStrOrNull(args[0].Type().Kind) {
			return TypeNull, nil, noFunc(name, args)
		}
		l, ok := args[1].(*Literal)
		if !ok || (l.V.K != KindVarchar && !l.V.K.IsInteger()) {
			return TypeNull, nil, Errorf(CodeNotSupported, "%s needs a constant key, index or path such as '$.a.b'", name)
		}
		if _, err := jsonSteps(l.V); err != nil {
			return TypeNull, nil, err
		}
		return result, args, nil
	}
}

// jsonSteps turns a -> operand into path steps: a MySQL path ('$...'), a key, or an index.
func jsonSteps(v Value) ([]jsonStep, error) {
	if v.K.IsInteger() {
		return []jsonStep{{index: int(v.I), isIndex: true}}, nil
	}
	if strings.HasPrefix(strings.TrimSpace(v.S), "$") {
		return parseJSONPath(v.S)
	}
	return []jsonStep{{key: v.S, index: -1}}, nil
}

func buildJSONGet(text bool) func(c *Call, args []Evaluator) (Evaluator, error) {
	return func(c *Call, args []Evaluator) (Evaluator, error) {
		steps, err := jsonSteps(c.Args[1].(*Literal).V)
		if err != nil {
			return nil, err
		}
		return strict1(args[0], func(v Value) Value {
			out, ok := jsonWalk(v.S, steps)
			return jsonResult(out, ok, text)
		}), nil
	}
}

func jsonResult(out string, ok bool, text bool) Value {
	if !ok {
		return Null
	}
	if text {
		s, ok := jsonUnquote(out)
		if !ok {
			return Null
		}
		return Varchar(s)
	}
	return JSONValue(out)
}

func jsonPathVariadic(name string, result Type) func(args []Expr) (Type, []Expr, error) {
	return func(args []Expr) (Type, []Expr, error) {
		if err := argCount(name, args, 2, -1); err != nil {
			return TypeNull, nil, err
		}
		if !isStrOrNull(args[0].Type().Kind) {
			return TypeNull, nil, noFunc(name, args)
		}
		out := []Expr{args[0]}
		for i := 1; i < len(args); i++ {
			a, err := textArg(name, args, i)
			if err != nil {
				return TypeNull, nil, err
			}
			out = append(out, a)
		}
		return result, out, nil
	}
}

func buildJSONPath(text bool) func(c *Call, args []Evaluator) (Evaluator, error) {
	return func(c *Call, args []Evaluator) (Evaluator, error) {
		return strictN(args, func(vs []Value) Value {
			doc := vs[0].S
			for _, k := range vs[1:] {
				i := skipWS(doc, 0)
				st := jsonStep{key: k.S, index: -1}
				if i < len(doc) && doc[i] == '[' {
					n, err := strconv.Atoi(strings.TrimSpace(k.S))
					if err != nil {
						return Null
					}
					st = jsonStep{index: n, isIndex: true}
				}
				out, ok := jsonWalk(doc, []jsonStep{st})
				if !ok {
					return Null
				}
				doc = out
			}
			return jsonResult(doc, true, text)
		}), nil
	}
}

// jsonWalk follows steps (negative indexes count from the end of the array).
func jsonWalk(doc string, steps []jsonStep) (string, bool) {
	for _, st := range steps {
		if st.isIndex && (st.index == 0 || st.index == -1) {
			// PostgreSQL reads a scalar as a one-element array.
			if i := skipWS(doc, 0); i < len(doc) && doc[i] != '[' && doc[i] != '{' {
				continue
			}
		}
		if st.isIndex && st.index < 0 {
			n := jsonArrayLen(doc)
			if n < 0 || -st.index > n {
				return "", false
			}
			st.index += n
		}
		if st.isIndex {
			st.isIndex = false
		}
		out, ok := jsonExtract(doc, []jsonStep{st})
		if !ok {
			return "", false
		}
		doc = out
	}
	return doc, true
}

// jsonArrayLen counts the elements of the JSON array doc (-1 if doc is not an array).
func jsonArrayLen(doc string) int {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return -1
	}
	i = skipWS(doc, i+1)
	n := 0
	for i < len(doc) && doc[i] != ']' {
		end, ok := skipValue(doc, i)
		if !ok {
			return -1
		}
		n++
		i = skipWS(doc, end)
		if i < len(doc) && doc[i] == ',' {
			i = skipWS(doc, i+1)
		}
	}
	return n
}
