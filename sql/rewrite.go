package sql

import (
	"sort"
	"strconv"
	"strings"
)

// The pre-pass turns stream syntax the MySQL grammar rejects into text the tidb parser
// accepts, remembering what it replaced and where. Most of it becomes a placeholder call
// __rsql_N(...) whose meaning is entry N of the statement's table of streamSyntax (kind
// and typed arguments, streamsyntax.go); the binder reads the entry, never the name:
//
//	INTERVAL '10' SECOND           -> __rsql_N()          (synInterval, ms 10000)
//	FROM TUMBLE(s, ts, size) [AS a] -> FROM `s` AS `__rsql_tvf_N`     (window N recorded)
//	FROM TUMBLE((SELECT ...), ts, size) -> FROM (SELECT ...) AS `__rsql_tvf_N`
//	JOIN LATERAL f(args) [WITH ORDINALITY] [AS] t[(c, ...)] -> JOIN (SELECT __rsql_tfn_N(args)) AS `t`  (call N recorded)
//	JOIN UNNEST(args) [AS] t[(c, ...)] -> JOIN (SELECT __rsql_tfn_N(args)) AS `t`
//	TUMBLE(ts, size) elsewhere     -> __rsql_N(ts, size)  (synWindow, WindowTumble; HOP, SESSION alike)
//	CAST(x AS type)                -> __rsql_N(x)         (synCast, the type)
//	TIMESTAMP '...'                -> __rsql_N('...')     (synTimestamp)
//	EMIT CHANGES | EMIT ON WINDOW CLOSE -> removed        (mode recorded)
//	$n or ?                        -> __rsql_N()          (synParam, n)
//	x::type                        -> __rsql_N(x)         (synCast: PostgreSQL cast)
//	j -> k, j ->> k                -> __rsql_N(j, k)      (synJSONGet, text for ->>)
//	a ~ 'p', a !~ 'p', a ~* 'p'    -> a REGEXP 'p', a NOT REGEXP 'p', a REGEXP __rsql_N('p') (synRegexpCI)
//	a IS [NOT] DISTINCT FROM b     -> [NOT] a <=> b
//	EXTRACT(unit FROM ts)          -> __rsql_N('unit', ts) (synExtract)
//	CONCAT(                        -> __rsql_N(           (synConcat, so that || stays an operator)
//	DIV( where an operand starts   -> `div`(              (PostgreSQL's div function, not the operator)
//	a FULL [OUTER] JOIN b ON c     -> a LEFT JOIN b ON __rsql_N() AND c   (synFullJoin)
//	JOIN t FOR SYSTEM_TIME AS OF e ... ON c -> JOIN t ... ON __rsql_N(e) AND c (synAsOf)
//	x [DESC] NULLS FIRST | LAST    -> x [DESC], __rsql_N() (synNulls: an ORDER BY item the binder takes out)
//	OFFSET n [ROWS], FETCH FIRST n ROWS ONLY, LIMIT ALL -> LIMIT count OFFSET n (noLimit when none)
//	a keyword used as a name (key, rows, rank; keywords.go) -> "key"
//
// Every position the tidb parser reports in the rewritten text maps back to the user's
// text through the rewrite's segments.

// rewrite is the rewritten text of one statement part and the map back to the input.
type rewrite struct {
	text     string
	srcStart int
	srcEnd   int
	segs     []rwSeg
}

// rwSeg maps text[out:out+n] to the input at src: exactly (byte for byte) or, for a
// replacement, every offset to src.
type rwSeg struct {
	out, src, n int
	srcN        int // length of the replaced input (replacements only)
	exact       bool
}

// mapEnd converts an exclusive end offset of the rewritten text to one of the input: the
// end of a replacement maps to the end of what it replaced.
func (r *rewrite) mapEnd(off int) int {
	if off <= 0 {
		return r.srcStart
	}
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].out+r.segs[i].n >= off })
	if i == len(r.segs) {
		return r.srcEnd
	}
	s := r.segs[i]
	if s.exact {
		return s.src + off - s.out
	}
	return s.src + s.srcN
}

// mapBack converts an offset of the rewritten text to an offset of the input.
func (r *rewrite) mapBack(off int) int {
	if off < 0 {
		return r.srcStart
	}
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].out+r.segs[i].n > off })
	if i == len(r.segs) {
		return r.srcEnd
	}
	s := r.segs[i]
	if off < s.out {
		return s.src
	}
	if s.exact {
		return s.src + off - s.out
	}
	return s.src
}

type edit struct {
	pos, end int
	repl     string
	seq      int // insertions (pos == end) at one offset: the later one goes first
}

// prepassResult is what the pre-pass records besides the text.
type prepassResult struct {
	emit    EmitMode
	emitPos int
	tvfs    []*windowCall  // window table functions, by N of `__rsql_tvf_N`
	tfns    []*tableCall   // table function calls, by N of `__rsql_tfn_N`
	syntax  []streamSyntax // what each placeholder call `__rsql_N(...)` stands for, by N
}

// tfnCall is the name of the call that stands for table function call N in the
// rewritten text.
const tfnCall = "__rsql_tfn_"

// tvfAlias is the alias a window table function's relation gets in the rewritten text.
const tvfAlias = "__rsql_tvf_"

// prepass rewrites the tokens from index start to the end of the statement. prefix is
// prepended to the rewritten text (mapped to the first token).
func (p *stmtParser) prepass(start int, prefix string) (*rewrite, *prepassResult, error) {
	toks := p.toks
	res := &prepassResult{emitPos: -1}
	var edits []edit
	depth := 0
	skip := map[int]int{} // token index -> index to continue at (the end of a TVF around a subquery)
	seq := 0
	// chains maps the last token of a rewritten x::t or j->k to its first token, so that
	// a following :: or -> takes the whole rewritten expression as its left operand.
	chains := map[int]int{}
	for i := start; i < len(toks) && toks[i].Kind != tokEOF; i++ {
		if j, ok := skip[i]; ok {
			i = j
			continue
		}
		t := toks[i]
		switch {
		case t.isP("("):
			depth++
		case t.isP(")"):
			depth--
		case t.Kind == tokIdent && len(t.Val) >= len(syntaxPrefix) && strings.EqualFold(t.Val[:len(syntaxPrefix)], syntaxPrefix):
			return nil, nil, errAt(p.src, t.Pos, CodeSyntax, "names starting with __rsql_ are reserved: %s", t.Val)
		case t.Kind == tokParam:
			n := 0
			if t.Val == "?" {
				p.nparam++
				n = p.nparam
			} else {
				// The lexer gives $ and one or more digits, so only a number too large
				// for an int fails.
				var err error
				if n, err = strconv.Atoi(t.Val[1:]); err != nil {
					return nil, nil, errAt(p.src, t.Pos, CodeSyntax, "parameter number %s is too large", t.Val)
				}
			}
			edits = append(edits, edit{t.Pos, t.End, res.add(streamSyntax{kind: synParam, param: n}) + "()", 0})
		case t.is("INTERVAL") && (toks[i+1].Kind == tokString || toks[i+1].Kind == tokNumber || toks[i+1].isP("-") && toks[i+2].Kind == tokNumber):
			// Otherwise interval is a name (keywords.go).
			ms, next, err := parseInterval(p.src, toks, i)
			if err != nil {
				return nil, nil, err
			}
			edits = append(edits, edit{t.Pos, toks[next-1].End, res.add(streamSyntax{kind: synInterval, ms: ms}) + "()", 0})
			i = next - 1
		case t.is("TIMESTAMP") && toks[i+1].Kind == tokString:
			s := toks[i+1]
			edits = append(edits, edit{t.Pos, s.End, res.add(streamSyntax{kind: synTimestamp}) + "(" + p.src[s.Pos:s.End] + ")", 0})
			i++
		case t.is("FULL") && (toks[i+1].is("JOIN") || toks[i+1].is("OUTER") && toks[i+2].is("JOIN")):
			// The MySQL grammar has no FULL JOIN: it becomes a LEFT JOIN whose ON starts
			// with a synFullJoin marker (the binder takes it out).
			on := joinOn(toks, i)
			if on < 0 {
				return nil, nil, errAt(p.src, t.Pos, CodeSyntax, "FULL JOIN needs an ON condition")
			}
			end := i
			if toks[i+1].is("OUTER") {
				end = i + 1
			}
			seq++
			edits = append(edits, edit{t.Pos, toks[end].End, "LEFT", 0},
				edit{toks[on].End, toks[on].End, " " + res.add(streamSyntax{kind: synFullJoin}) + "() AND", seq})
			i = end
		case t.is("FOR") && toks[i+1].is("SYSTEM_TIME") && toks[i+2].is("AS") && toks[i+3].is("OF"):
			// JOIN t FOR SYSTEM_TIME AS OF expr [AS] alias ON c becomes JOIN t [AS] alias ON
			// a synAsOf marker of expr AND c (the binder takes the marker out).
			start, end := i+4, i+4
			for d := 0; toks[end].Kind != tokEOF; end++ {
				switch {
				case toks[end].isP("("):
					d++
				case toks[end].isP(")"):
					d--
				}
				if d < 0 || d == 0 && end > start && (toks[end].is("AS") || toks[end].is("ON") || isClauseWord(toks[end]) ||
					toks[end].isP(",") || toks[end].Kind == tokIdent && toks[end-1].Kind == tokIdent && !toks[end-1].isP(".")) {
					break
				}
			}
			if end == start {
				return nil, nil, errAt(p.src, toks[start].Pos, CodeSyntax, "FOR SYSTEM_TIME AS OF needs a time expression (o.ts, o.proctime)")
			}
			on := joinOn(toks, end)
			if on < 0 {
				return nil, nil, errAt(p.src, t.Pos, CodeSyntax, "a join FOR SYSTEM_TIME AS OF needs an ON condition")
			}
			expr := p.src[toks[start].Pos:toks[end-1].End]
			seq++
			edits = append(edits, edit{t.Pos, toks[end-1].End, " ", 0},
				edit{toks[on].End, toks[on].End, " " + res.add(streamSyntax{kind: synAsOf}) + "(" + expr + ") AND", seq})
			i = end - 1
		case t.is("NULLS") && (toks[i+1].is("FIRST") || toks[i+1].is("LAST")):
			// The MySQL grammar has no NULLS FIRST/LAST: it becomes an ORDER BY item of its
			// own after the one it orders (the binder takes it out).
			edits = append(edits, edit{t.Pos, toks[i+1].End, ", " + res.add(streamSyntax{kind: synNulls, text: toks[i+1].is("FIRST")}) + "()", 0})
			i++
		case t.is("LIMIT") || t.is("OFFSET") || t.is("FETCH") && (toks[i+1].is("FIRST") || toks[i+1].is("NEXT")):
			last, repl, err := p.limitClause(toks, i)
			if err != nil {
				return nil, nil, err
			}
			if repl != "" {
				edits = append(edits, edit{t.Pos, toks[last].End, repl, 0})
			}
			i = last
		case t.is("EMIT") && depth == 0:
			mode := EmitDefault
			end := i + 1
			switch {
			case toks[i+1].is("CHANGES"):
				mode, end = EmitChanges, i+2
			case toks[i+1].is("FINAL"):
				mode, end = EmitOnClose, i+2
			case toks[i+1].is("ON") && toks[i+2].is("WINDOW") && toks[i+3].is("CLOSE"):
				mode, end = EmitOnClose, i+4
			default:
				return nil, nil, p.errNear(toks[i+1], "CHANGES or ON WINDOW CLOSE after EMIT")
			}
			if res.emit != EmitDefault {
				return nil, nil, errAt(p.src, t.Pos, CodeSyntax, "only one EMIT clause is allowed")
			}
			res.emit, res.emitPos = mode, t.Pos
			edits = append(edits, edit{t.Pos, toks[end-1].End, " ", 0})
			i = end - 1
		case (t.is("JOIN") || t.isP(",")) && toks[i+1].is("LATERAL") && (toks[i+2].Kind == tokIdent || toks[i+2].Kind == tokQIdent) && toks[i+3].isP("("),
			t.is("JOIN") && toks[i+1].is("UNNEST") && toks[i+2].isP("("):
			// A table function call: its arguments stay in the text (inside a derived
			// table the binder recognizes), the alias and its column list are recorded.
			nameIdx := i + 2
			if toks[i+1].is("UNNEST") {
				nameIdx = i + 1
			}
			open := nameIdx + 1
			closeIdx := matchParen(toks, open)
			if closeIdx < 0 {
				continue // let the tidb parser report it
			}
			tc := &tableCall{name: toks[nameIdx].Val, pos: toks[nameIdx].Pos, alias: toks[nameIdx].Val, colsPos: -1}
			if toks[nameIdx].Kind == tokIdent {
				tc.alias = strings.ToLower(tc.alias)
			}
			end := closeIdx // the last token of the call and its alias
			a := closeIdx + 1
			if toks[a].is("WITH") && toks[a+1].is("ORDINALITY") {
				tc.ordinality, end, a = true, a+1, a+2
			}
			if toks[a].is("AS") {
				a++
			}
			if at := toks[a]; at.Kind == tokQIdent || at.Kind == tokIdent && !isClauseWord(at) && !at.is("AS") && !at.is("WITH") {
				tc.alias, end = at.Val, a
				if at.Kind == tokIdent {
					tc.alias = strings.ToLower(at.Val)
				}
				if toks[a+1].isP("(") {
					colsClose := matchParen(toks, a+1)
					if colsClose < 0 {
						return nil, nil, errAt(p.src, toks[a+1].Pos, CodeSyntax, "the column list of %s is not closed", at.Val)
					}
					tc.colsPos = toks[a+2].Pos
					for k := a + 2; k < colsClose; k++ {
						c := toks[k]
						if c.Kind != tokIdent && c.Kind != tokQIdent {
							return nil, nil, p.errNear(c, "a column name")
						}
						name := c.Val
						if c.Kind == tokIdent {
							name = strings.ToLower(name)
						}
						tc.cols = append(tc.cols, name)
						if k+1 < colsClose {
							if !toks[k+1].isP(",") {
								return nil, nil, p.errNear(toks[k+1], `"," or ")"`)
							}
							k++
						}
					}
					if len(tc.cols) == 0 {
						return nil, nil, p.errNear(toks[colsClose], "a column name")
					}
					end = colsClose
				}
			} else if toks[a-1].is("AS") {
				return nil, nil, p.errNear(toks[a], "an alias after AS")
			}
			call := tfnCall + strconv.Itoa(len(res.tfns))
			res.tfns = append(res.tfns, tc)
			repl := " CROSS JOIN"
			if t.is("JOIN") {
				repl = "JOIN"
			}
			edits = append(edits, edit{t.Pos, toks[open].End, repl + " (SELECT " + call + "(", 0},
				edit{toks[closeIdx].End, toks[end].End, ") AS `" + strings.ReplaceAll(tc.alias, "`", "``") + "`", 0})
			if end > closeIdx {
				skip[closeIdx+1] = end
			}
			i = open - 1 // the loop goes on at the call's "(", through the arguments
		case (t.is("FROM") || t.is("JOIN")) && isWindowFunc(toks[i+1]) && toks[i+2].isP("("):
			w, closeIdx, err := p.windowTVF(i + 1)
			if err != nil {
				return nil, nil, err
			}
			end := closeIdx
			switch a := toks[closeIdx+1]; {
			case a.is("AS") && (toks[closeIdx+2].Kind == tokIdent || toks[closeIdx+2].Kind == tokQIdent):
				w.alias, end = toks[closeIdx+2].Val, closeIdx+2
			case a.Kind == tokQIdent || a.Kind == tokIdent && !isClauseWord(a):
				w.alias, end = a.Val, closeIdx+1
			}
			name := tvfAlias + strconv.Itoa(len(res.tvfs))
			res.tvfs = append(res.tvfs, w)
			if w.subOpen < 0 {
				edits = append(edits, edit{toks[i+1].Pos, toks[end].End, "`" + strings.ReplaceAll(w.source, "`", "``") + "` AS `" + name + "`", 0})
				i = end
				continue
			}
			// The subquery stays in the text (its own stream syntax is rewritten as the
			// loop goes through it); what surrounds it is replaced.
			edits = append(edits, edit{toks[i+1].Pos, toks[i+2].End, " ", 0},
				edit{toks[w.subClose].End, toks[end].End, " AS `" + name + "`", 0})
			skip[w.subClose+1] = end
			i = w.subOpen - 1
		case isWindowFunc(t) && toks[i+1].isP("("):
			kind := map[string]WindowKind{"TUMBLE": WindowTumble, "HOP": WindowHop, "SESSION": WindowSession}[strings.ToUpper(t.Val)]
			edits = append(edits, edit{t.Pos, t.End, res.add(streamSyntax{kind: synWindow, window: kind}), 0})
		case t.isP("::") && i > start:
			ls := p.operandStart(toks, start, i, chains)
			sub := &stmtParser{src: p.src, toks: append([]token(nil), toks[i+1:]...)}
			typ, err := sub.typeName()
			if err != nil {
				return nil, nil, err
			}
			last := i + sub.i // the type's last token
			seq++
			tn := castColumnName(toks[i+1].Val, toks[min(i+2, last)].Val)
			edits = append(edits, edit{toks[ls].Pos, toks[ls].Pos, res.add(streamSyntax{kind: synCast, typ: typ, typName: tn}) + "(", seq},
				edit{t.Pos, toks[last].End, ")", 0})
			chains[last] = ls
			i = last
		case (t.isP("->") || t.isP("->>")) && i > start && toks[i+1].Kind != tokEOF:
			ls := p.operandStart(toks, start, i, chains)
			re := i + 1
			if toks[re].isP("-") && toks[re+1].Kind == tokNumber {
				re++
			}
			fn := res.add(streamSyntax{kind: synJSONGet, text: t.Val == "->>"}) + "("
			seq++
			edits = append(edits, edit{toks[ls].Pos, toks[ls].Pos, fn, seq},
				edit{t.Pos, t.End, ",", 0},
				edit{toks[re].End, toks[re].End, ")", 0})
			chains[re] = ls
			i = re
		case t.isP("~") && i > start && endsOperand(toks[i-1]):
			if toks[i+1].isP("*") {
				n := toks[i+2]
				if n.Kind == tokEOF {
					continue
				}
				edits = append(edits, edit{t.Pos, toks[i+1].End, " REGEXP " + res.add(streamSyntax{kind: synRegexpCI}) + "(", 0}, edit{n.End, n.End, ")", 0})
				i += 2
				continue
			}
			edits = append(edits, edit{t.Pos, t.End, " REGEXP ", 0})
		case t.isP("!") && toks[i+1].isP("~") && toks[i+1].Pos == t.End && i > start && endsOperand(toks[i-1]):
			edits = append(edits, edit{t.Pos, toks[i+1].End, " NOT REGEXP ", 0})
			i++
		case t.is("IS") && (toks[i+1].is("DISTINCT") && toks[i+2].is("FROM") || toks[i+1].is("NOT") && toks[i+2].is("DISTINCT") && toks[i+3].is("FROM")):
			not := toks[i+1].is("NOT")
			last := i + 2
			if not {
				last = i + 3
			}
			edits = append(edits, edit{t.Pos, toks[last].End, "<=>", 0})
			if !not {
				ls := p.comparisonStart(toks, start, i)
				seq++
				edits = append(edits, edit{toks[ls].Pos, toks[ls].Pos, "NOT ", seq})
			}
			i = last
		case t.is("EXTRACT") && toks[i+1].isP("(") && toks[i+2].Kind == tokIdent && toks[i+3].is("FROM"):
			edits = append(edits, edit{t.Pos, toks[i+3].End, res.add(streamSyntax{kind: synExtract}) + "(" + quoteString(toks[i+2].Val) + ",", 0})
			i += 3
		case t.is("CONCAT") && toks[i+1].isP("("):
			edits = append(edits, edit{t.Pos, t.End, res.add(streamSyntax{kind: synConcat}), 0})
		case t.is("DIV") && toks[i+1].isP("(") && (i == 0 || !endsOperand(toks[i-1])):
			// PostgreSQL's div(a, b), where the MySQL grammar knows only the operator a DIV b:
			// the quoted name reaches the function of that name.
			edits = append(edits, edit{t.Pos, t.End, "`div`", 0})
		case t.is("CAST") && toks[i+1].isP("("):
			closeIdx := matchParen(toks, i+1)
			if closeIdx < 0 {
				continue // let the tidb parser report it
			}
			asIdx := -1
			d := 0
			for k := i + 1; k < closeIdx; k++ {
				switch {
				case toks[k].isP("("):
					d++
				case toks[k].isP(")"):
					d--
				case d == 1 && toks[k].is("AS"):
					asIdx = k
				}
			}
			if asIdx < 0 {
				continue
			}
			sub := &stmtParser{src: p.src, toks: append(append([]token(nil), toks[asIdx+1:closeIdx]...), token{Kind: tokEOF, Pos: toks[closeIdx].Pos, End: toks[closeIdx].Pos})}
			typ, err := sub.typeName()
			if err != nil {
				return nil, nil, err
			}
			if err := sub.expectEnd(); err != nil {
				return nil, nil, err
			}
			edits = append(edits,
				edit{t.Pos, t.End, res.add(streamSyntax{kind: synCast, typ: typ, typName: castColumnName(toks[asIdx+1].Val, toks[min(asIdx+2, closeIdx)].Val)}), 0},
				edit{toks[asIdx].Pos, toks[closeIdx].Pos, "", 0})
		}
	}
	edits = quoteKeywordNames(toks, start, edits)
	sort.SliceStable(edits, func(a, b int) bool {
		ea, eb := edits[a], edits[b]
		if ea.pos != eb.pos {
			return ea.pos < eb.pos
		}
		ia, ib := ea.pos == ea.end, eb.pos == eb.end
		if ia != ib {
			return ia // insertions before a replacement at the same offset
		}
		return ea.seq > eb.seq
	})
	srcStart := toks[start].Pos
	srcEnd := toks[len(toks)-1].End
	rw := &rewrite{srcStart: srcStart, srcEnd: srcEnd}
	var b strings.Builder
	if prefix != "" {
		rw.segs = append(rw.segs, rwSeg{out: 0, src: srcStart, n: len(prefix)})
		b.WriteString(prefix)
	}
	cur := srcStart
	for _, e := range edits {
		if e.pos > cur {
			rw.segs = append(rw.segs, rwSeg{out: b.Len(), src: cur, n: e.pos - cur, exact: true})
			b.WriteString(p.src[cur:e.pos])
		}
		if e.repl != "" {
			rw.segs = append(rw.segs, rwSeg{out: b.Len(), src: e.pos, n: len(e.repl), srcN: e.end - e.pos})
			b.WriteString(e.repl)
		}
		cur = e.end
	}
	if srcEnd > cur {
		rw.segs = append(rw.segs, rwSeg{out: b.Len(), src: cur, n: srcEnd - cur, exact: true})
		b.WriteString(p.src[cur:srcEnd])
	}
	rw.text = b.String()
	return rw, res, nil
}

// noLimit is the count a LIMIT clause the pre-pass writes has when the query gives none
// (OFFSET alone, LIMIT ALL); the binder reads it as no limit.
const noLimit = "9223372036854775807"

// limitClause reads PostgreSQL's row-limiting clauses at toks[i], in either order: LIMIT
// count | ALL, OFFSET start [ROW | ROWS], FETCH FIRST | NEXT [count] ROW | ROWS ONLY. It
// returns the index of their last token and, unless they are already in the form the
// MySQL grammar accepts (LIMIT n [OFFSET m], LIMIT m, n), the text LIMIT n OFFSET m that
// replaces them.
func (p *stmtParser) limitClause(toks []token, i int) (last int, repl string, err error) {
	count, offset := "", ""
	canonical := true
	num := func(k int, what string) (string, error) {
		if toks[k].Kind != tokNumber || strings.ContainsAny(toks[k].Val, ".eE") {
			return "", p.errNear(toks[k], "a whole number after "+what)
		}
		return toks[k].Val, nil
	}
	k := i
	for part := 0; part < 3; part++ {
		t := toks[k]
		switch {
		case t.is("LIMIT") && count == "":
			if toks[k+1].is("ALL") {
				count, canonical = noLimit, false
				k += 2
				break
			}
			if toks[k+1].Kind != tokNumber {
				return k, "", nil // a parameter or an expression: the tidb parser reports it
			}
			if count, err = num(k+1, "LIMIT"); err != nil {
				return 0, "", err
			}
			k += 2
			if toks[k].isP(",") && offset == "" { // LIMIT m, n
				offset = count
				if count, err = num(k+1, "LIMIT m,"); err != nil {
					return 0, "", err
				}
				k += 2
			}
		case t.is("OFFSET") && offset == "":
			if toks[k+1].Kind != tokNumber {
				return k, "", nil
			}
			if offset, err = num(k+1, "OFFSET"); err != nil {
				return 0, "", err
			}
			if count == "" {
				canonical = false // OFFSET before LIMIT, or without it
			}
			k += 2
			if toks[k].is("ROW") || toks[k].is("ROWS") {
				canonical = false
				k++
			}
		case t.is("FETCH") && (toks[k+1].is("FIRST") || toks[k+1].is("NEXT")):
			if count != "" {
				return 0, "", errAt(p.src, t.Pos, CodeSyntax, "LIMIT and FETCH FIRST cannot both be given")
			}
			canonical = false
			k += 2
			count = "1"
			if toks[k].Kind == tokNumber {
				if count, err = num(k, "FETCH FIRST"); err != nil {
					return 0, "", err
				}
				k++
			}
			if !toks[k].is("ROW") && !toks[k].is("ROWS") {
				return 0, "", p.errNear(toks[k], "ROWS in FETCH FIRST n ROWS ONLY")
			}
			k++
			if toks[k].is("WITH") && toks[k+1].is("TIES") {
				return 0, "", errAt(p.src, toks[k].Pos, CodeNotSupported, "FETCH FIRST ... WITH TIES is not supported: use ONLY")
			}
			if !toks[k].is("ONLY") {
				return 0, "", p.errNear(toks[k], "ONLY in FETCH FIRST n ROWS ONLY")
			}
			k++
		default:
			part = 3
			continue
		}
	}
	last = k - 1
	if canonical {
		return last, "", nil
	}
	if count == "" {
		count = noLimit
	}
	repl = "LIMIT " + count
	if offset != "" {
		repl += " OFFSET " + offset
	}
	return last, repl, nil
}

// endsOperand reports whether t can be the last token of an operand (so a following ~ is
// the binary regular-expression match, not bitwise NOT).
func endsOperand(t token) bool {
	switch t.Kind {
	case tokIdent:
		switch strings.ToUpper(t.Val) {
		case "SELECT", "WHERE", "AND", "OR", "NOT", "WHEN", "THEN", "ELSE", "ON", "HAVING", "BY", "CASE", "IN", "LIKE", "IS":
			return false
		}
		return true
	case tokQIdent, tokString, tokNumber, tokParam:
		return true
	case tokPunct:
		return t.Val == ")"
	}
	return false
}

// operandStart returns the index of the first token of the primary expression that ends
// at toks[i-1]: a literal, a (qualified) name, a parenthesized group or a call, or an
// earlier rewritten chain.
func (p *stmtParser) operandStart(toks []token, start, i int, chains map[int]int) int {
	j := i - 1
	if s, ok := chains[j]; ok {
		return s
	}
	if toks[j].isP(")") {
		d := 0
		for k := j; k >= start; k-- {
			switch {
			case toks[k].isP(")"):
				d++
			case toks[k].isP("("):
				d--
				if d == 0 {
					if k > start && (toks[k-1].Kind == tokIdent || toks[k-1].Kind == tokQIdent) && !isKeywordBefore(toks[k-1]) {
						return k - 1
					}
					return k
				}
			}
		}
		return j
	}
	if toks[j].Kind == tokString && j > start && (toks[j-1].is("TIMESTAMP") || toks[j-1].is("DATE")) {
		return j - 1
	}
	for j-2 >= start && toks[j-1].isP(".") && (toks[j-2].Kind == tokIdent || toks[j-2].Kind == tokQIdent) {
		j -= 2
	}
	return j
}

func isKeywordBefore(t token) bool {
	switch strings.ToUpper(t.Val) {
	case "IN", "AND", "OR", "NOT", "SELECT", "WHERE", "WHEN", "THEN", "ELSE", "ON", "HAVING", "BY", "AS", "EXISTS":
		return true
	}
	return false
}

// comparisonStart returns the index of the first token of the left operand of a
// comparison whose operator is at toks[i]: back to the nearest enclosing '(' or ',', or a
// keyword binding looser than comparison.
func (p *stmtParser) comparisonStart(toks []token, start, i int) int {
	d := 0
	for k := i - 1; k >= start; k-- {
		t := toks[k]
		switch {
		case t.isP(")"):
			d++
		case t.isP("("):
			if d == 0 {
				return k + 1
			}
			d--
		case d == 0 && (t.isP(",") || t.Kind == tokIdent && isKeywordBefore(t) && !t.is("IN") && !t.is("AS") || t.is("CASE")):
			return k + 1
		}
	}
	return start
}

func isWindowFunc(t token) bool { return t.is("TUMBLE") || t.is("HOP") || t.is("SESSION") }

// joinOn returns the index of the ON of the join whose keyword is at or after toks[from]:
// the first ON at the same parenthesis depth, or -1.
func joinOn(toks []token, from int) int {
	d := 0
	for k := from; k < len(toks) && toks[k].Kind != tokEOF; k++ {
		switch {
		case toks[k].isP("("):
			d++
		case toks[k].isP(")"):
			d--
			if d < 0 {
				return -1
			}
		case d == 0 && toks[k].is("ON"):
			return k
		case d == 0 && k > from && (toks[k].is("WHERE") || toks[k].is("GROUP") || toks[k].isP(";")):
			return -1
		}
	}
	return -1
}

// isClauseWord reports whether an identifier after a table reference starts the next
// clause rather than naming an alias.
func isClauseWord(t token) bool {
	for _, w := range []string{"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION", "EXCEPT",
		"INTERSECT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "ON", "USING", "EMIT", "WINDOW", "FOR", "NATURAL"} {
		if t.is(w) {
			return true
		}
	}
	return false
}

// matchParen returns the index of the ')' closing the '(' at toks[open], or -1.
func matchParen(toks []token, open int) int {
	d := 0
	for k := open; k < len(toks); k++ {
		switch {
		case toks[k].isP("("):
			d++
		case toks[k].isP(")"):
			d--
			if d == 0 {
				return k
			}
		case toks[k].Kind == tokEOF:
			return -1
		}
	}
	return -1
}

// windowTVF parses TUMBLE(s, ts, size) | HOP(s, ts, slide, size) | SESSION(s, ts, gap) at
// toks[i] (TABLE s and DESCRIPTOR(ts) are accepted too); s is a name or a parenthesized
// query. It returns the index of the closing parenthesis.
func (p *stmtParser) windowTVF(i int) (*windowCall, int, error) {
	toks := p.toks
	fn := toks[i]
	closeIdx := matchParen(toks, i+1)
	if closeIdx < 0 {
		return nil, 0, errAt(p.src, toks[i+1].Pos, CodeSyntax, "unclosed ( of %s", strings.ToUpper(fn.Val))
	}
	// Split the arguments on depth-1 commas.
	var args [][]token
	d, from := 0, i+2
	for k := i + 1; k <= closeIdx; k++ {
		switch {
		case toks[k].isP("("):
			d++
		case toks[k].isP(")"):
			d--
			if d == 0 {
				args = append(args, toks[from:k])
			}
		case d == 1 && toks[k].isP(","):
			args = append(args, toks[from:k])
			from = k + 1
		}
	}
	w := &windowCall{pos: fn.Pos, subOpen: -1, subClose: -1}
	name := strings.ToUpper(fn.Val)
	want := 3
	switch name {
	case "TUMBLE":
		w.kind = WindowTumble
	case "HOP":
		w.kind, want = WindowHop, 4
	case "SESSION":
		w.kind = WindowSession
	}
	usage := map[string]string{"TUMBLE": "TUMBLE(relation, time_column, INTERVAL 'n' UNIT)",
		"HOP":     "HOP(relation, time_column, INTERVAL slide, INTERVAL size)",
		"SESSION": "SESSION(relation, time_column, INTERVAL gap)"}[name]
	if len(args) != want {
		return nil, 0, errAt(p.src, fn.Pos, CodeSyntax, "%s takes %d arguments: %s", name, want, usage)
	}
	for k, a := range args {
		if len(a) == 0 {
			return nil, 0, errAt(p.src, fn.Pos, CodeSyntax, "empty argument %d of %s: %s", k+1, name, usage)
		}
	}
	// Relation: a name, or a query in parentheses.
	a := args[0]
	if len(a) == 2 && a[0].is("TABLE") {
		a = a[1:]
	}
	if a[0].isP("(") {
		open := indexOfToken(toks, a[0])
		if matchParen(toks, open) != indexOfToken(toks, a[len(a)-1]) {
			return nil, 0, errAt(p.src, a[0].Pos, CodeSyntax, "argument 1 of %s must be a relation name or a query in parentheses: %s", name, usage)
		}
		w.subOpen, w.subClose = open, open+len(a)-1
	} else if len(a) != 1 || (a[0].Kind != tokIdent && a[0].Kind != tokQIdent) {
		return nil, 0, errAt(p.src, args[0][0].Pos, CodeSyntax, "argument 1 of %s must be a relation name or a query in parentheses: %s", name, usage)
	} else {
		w.source = a[0].Val
	}
	// Time column.
	a = args[1]
	if len(a) == 4 && a[0].is("DESCRIPTOR") && a[1].isP("(") && a[3].isP(")") {
		a = a[2:3]
	}
	if len(a) != 1 || (a[0].Kind != tokIdent && a[0].Kind != tokQIdent) {
		return nil, 0, errAt(p.src, args[1][0].Pos, CodeSyntax, "argument 2 of %s must be a column name: %s", name, usage)
	}
	w.timeCol, w.timePos = a[0].Val, a[0].Pos
	// Sizes.
	sizes := make([]int64, 0, 2)
	for _, a := range args[2:] {
		if !a[0].is("INTERVAL") {
			return nil, 0, errAt(p.src, a[0].Pos, CodeSyntax, "%s sizes are INTERVAL 'n' UNIT: %s", name, usage)
		}
		at := indexOfToken(toks, a[0])
		ms, next, err := parseInterval(p.src, toks, at)
		if err != nil {
			return nil, 0, err
		}
		if next != at+len(a) {
			return nil, 0, errAt(p.src, toks[next].Pos, CodeSyntax, "unexpected text after the INTERVAL in %s", name)
		}
		if ms <= 0 {
			return nil, 0, errAt(p.src, a[0].Pos, CodeInvalidValue, "%s sizes must be positive", name)
		}
		sizes = append(sizes, ms)
	}
	switch w.kind {
	case WindowTumble:
		w.size = sizes[0]
	case WindowHop:
		w.slide, w.size = sizes[0], sizes[1]
	case WindowSession:
		w.gap = sizes[0]
	}
	return w, closeIdx, nil
}

func indexOfToken(toks []token, t token) int {
	for i := range toks {
		if toks[i].Pos == t.Pos {
			return i
		}
	}
	return -1
}
