package server

import (
	"strings"

	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
)

// Point lookups (docs/sql.md, "Point lookups"): a pull query over one keyed materialized
// view whose WHERE fixes every column of the view's key to constants (k = c, k IN (c1,
// ...), AND-ed with anything else) reads only those keys' rows from the store
// (exec.LookupView) instead of every row (exec.ReadView). The query is planned and run as
// before, WHERE included: the lookup only narrows the rows the view's source hands on to
// those the key conditions can accept, so the answer is the scan's. A condition whose
// constant does not convert exactly to the key column's type (an INT key and 2.5, a
// NUMERIC key, ...) leaves the query to the scan.

// maxPointKeys bounds the keys one pull query looks up (the product of the IN lists of a
// composite key); more are read by a scan.
const maxPointKeys = 4096

// viewKeyInfo is where a keyed view's rows are: the stage of its job that writes them and
// the view's key columns (planner.SinkSpec.KeyColumns). keys is nil for a view whose rows
// are not kept by key.
type viewKeyInfo struct {
	stage int
	keys  []int
}

// keyedView returns where the rows of view d are kept by key; ok is false for a view kept
// otherwise (every row, a multiset, a global aggregate) or whose job cannot be planned
// again. The answer is kept per job and statement: its plan does not change.
func (e *Engine) keyedView(d StreamDef) (viewKeyInfo, bool) {
	def, ok := e.cat.Job(d.Job)
	if !ok {
		return viewKeyInfo{}, false
	}
	id := def.ID + "\x00" + def.Statement
	e.mu.Lock()
	vk, seen := e.viewKeys[id]
	e.mu.Unlock()
	if seen {
		return vk, vk.keys != nil
	}
	q, sink, err := e.jobQuery(def)
	if err != nil {
		return viewKeyInfo{}, false
	}
	_, plan, err := planner.Plan(q, def.planOptions(sink))
	if err != nil || len(plan.Stages) == 0 {
		return viewKeyInfo{}, false
	}
	last := plan.Stages[len(plan.Stages)-1]
	if last.Sink.Connector == "view" && len(last.Sink.KeyColumns) > 0 {
		vk = viewKeyInfo{stage: last.ID, keys: append([]int(nil), last.Sink.KeyColumns...)}
	}
	e.mu.Lock()
	if e.viewKeys == nil {
		e.viewKeys = map[string]viewKeyInfo{}
	}
	e.viewKeys[id] = vk
	e.mu.Unlock()
	return vk, vk.keys != nil
}

// pointLookup is what a pull query looks up in its view: the stage writing the view's rows,
// the keys (exec.ViewKey encodings) and, for EXPLAIN, the conditions that fixed them.
type pointLookup struct {
	view  string
	job   string
	stage int
	keys  [][]byte
	conds []string
}

// pointLookupOf returns the lookup of pull query q, or nil when q scans: q reads one
// materialized view, kept by key, and its WHERE fixes each key column.
func (e *Engine) pointLookupOf(q *sql.Query) *pointLookup {
	if q.Where == nil || len(q.Relations()) != 1 {
		return nil
	}
	fr, ok := q.From.(*sql.FromRelation)
	if !ok || !fr.Rel.IsView {
		return nil
	}
	d, ok := e.cat.Stream(fr.Rel.Name)
	if !ok || d.Job == "" || !d.IsView {
		return nil
	}
	vk, ok := e.keyedView(d)
	if !ok {
		return nil
	}
	keys, conds, ok := pointKeys(q.Where, fr.Rel.Schema, vk.keys)
	if !ok {
		return nil
	}
	return &pointLookup{view: fr.Rel.Name, job: d.Job, stage: vk.stage, keys: keys, conds: conds}
}

// explain is the line EXPLAIN prints for the lookup.
func (p *pointLookup) explain() string {
	return "Lookup view " + p.view + " by key: " + strings.Join(p.conds, " AND ")
}

// pointKeys returns the encoded keys that where fixes for the key columns keys of a row of
// schema: every key column must be compared by = or IN with constants in a conjunct of
// where. ok is false when it does not, when a constant does not convert exactly to its
// column's type, or when there are more than maxPointKeys keys.
func pointKeys(where sql.Expr, schema sql.Schema, keys []int) ([][]byte, []string, bool) {
	var conj []sql.Expr
	var flatten func(e sql.Expr)
	flatten = func(e sql.Expr) {
		if c, ok := e.(*sql.Call); ok && c.Func == "AND" {
			for _, a := range c.Args {
				flatten(a)
			}
			return
		}
		conj = append(conj, e)
	}
	flatten(where)
	vals := make([][]sql.Value, len(keys))
	conds := make([]string, len(keys))
	for i, col := range keys {
		found := false
		for _, e := range conj {
			vs, ok := keyCondition(e, col, schema[col].Type.Kind)
			if !ok {
				continue
			}
			if found && len(vs) >= len(vals[i]) {
				continue // an earlier condition on the column fixes fewer keys
			}
			vals[i], conds[i], found = vs, e.String(), true
		}
		if !found {
			return nil, nil, false
		}
	}
	n := 1
	for _, vs := range vals {
		n *= len(vs)
		if n > maxPointKeys {
			return nil, nil, false
		}
	}
	out := make([][]byte, 0, n)
	key := make(sql.Row, len(keys))
	var gen func(i int)
	gen = func(i int) {
		if i == len(keys) {
			out = append(out, exec.ViewKey(nil, key))
			return
		}
		for _, v := range vals[i] {
			key[i] = v
			gen(i + 1)
		}
	}
	gen(0)
	return out, conds, true
}

// keyCondition returns the stored values of column col (of kind kind) that condition e
// accepts when e is col = constant or col IN (constants); ok is false otherwise, or when a
// constant does not convert exactly. NULL constants accept no value. An integer column is
// looked up both as INT and as BIGINT: the row holds one of them.
func keyCondition(e sql.Expr, col int, kind sql.Kind) (vals []sql.Value, ok bool) {
	var args []sql.Expr
	switch x := e.(type) {
	case *sql.Call:
		if x.Func != "=" || len(x.Args) != 2 {
			return nil, false
		}
		switch {
		case isKeyColumn(x.Args[0], col, kind):
			args = x.Args[1:]
		case isKeyColumn(x.Args[1], col, kind):
			args = x.Args[:1]
		default:
			return nil, false
		}
	case *sql.In:
		if x.Not || !isKeyColumn(x.Arg, col, kind) {
			return nil, false
		}
		args = x.List
	default:
		return nil, false
	}
	seen := map[sql.Value]bool{}
	for _, a := range args {
		if !isConstant(a) {
			return nil, false
		}
		v, err := sql.Eval(a, nil)
		if err != nil {
			return nil, false
		}
		if v.IsNull() {
			continue
		}
		kv, ok := keyValue(v, kind)
		if !ok {
			return nil, false
		}
		if seen[kv] {
			continue
		}
		seen[kv] = true
		vals = append(vals, kv)
		if kind == sql.KindInt {
			vals = append(vals, sql.BigInt(kv.I))
		} else if kind == sql.KindBigInt && kv.I >= -1<<31 && kv.I < 1<<31 {
			vals = append(vals, sql.Int(kv.I))
		}
	}
	return vals, true
}

// isKeyColumn reports whether e reads column col as it is, or widened exactly (an integer
// cast to BIGINT or NUMERIC, as a comparison with a wider constant does).
func isKeyColumn(e sql.Expr, col int, kind sql.Kind) bool {
	if c, ok := e.(*sql.Cast); ok {
		to := c.T.Kind
		widen := to == kind || (kind == sql.KindInt || kind == sql.KindBigInt) && (to == sql.KindBigInt || to == sql.KindDecimal)
		if !widen {
			return false
		}
		e = c.Arg
	}
	r, ok := e.(*sql.ColumnRef)
	return ok && r.Index == col && r.T.Kind == kind
}

// isConstant reports whether e reads no column: literals, casts and operators of them.
func isConstant(e sql.Expr) bool {
	switch x := e.(type) {
	case *sql.Literal:
		return true
	case *sql.Cast:
		return isConstant(x.Arg)
	case *sql.Call:
		if x.Def != nil {
			return false
		}
		switch x.Func {
		case "NEG", "+", "-", "*", "||":
		default:
			return false
		}
		for _, a := range x.Args {
			if !isConstant(a) {
				return false
			}
		}
		return true
	}
	return false
}

// keyValue converts constant v to the value a key column of kind kind holds when it equals
// v (PostgreSQL's comparison: an integer with an integral NUMERIC, text with text); ok is
// false when the conversion is not exact (2.5 for an INT key, a value out of its range,
// a NUMERIC or DOUBLE key, ...).
func keyValue(v sql.Value, kind sql.Kind) (sql.Value, bool) {
	switch kind {
	case sql.KindInt, sql.KindBigInt:
		var n int64
		switch v.K {
		case sql.KindInt, sql.KindBigInt:
			n = v.I
		case sql.KindDecimal:
			if v.S != "" || v.Scale > 18 {
				return sql.Null, false
			}
			p := int64(1)
			for i := uint8(0); i < v.Scale; i++ {
				p *= 10
			}
			if v.I%p != 0 {
				return sql.Null, false
			}
			n = v.I / p
		default:
			return sql.Null, false
		}
		if kind == sql.KindInt {
			if n < -1<<31 || n >= 1<<31 {
				return sql.Null, false
			}
			return sql.Int(n), true
		}
		return sql.BigInt(n), true
	case sql.KindVarchar:
		if v.K == sql.KindVarchar {
			return sql.Varchar(v.S), true
		}
	}
	return sql.Null, false
}
