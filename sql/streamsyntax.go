package sql

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// syntaxKind says what piece of stream syntax a placeholder call of the rewritten text
// stands for.
type syntaxKind uint8

const (
	synNone      syntaxKind = iota
	synInterval             // INTERVAL '10' SECOND: ms; no arguments in the text
	synParam                // $n or ?: param; no arguments in the text
	synTimestamp            // TIMESTAMP '...': the string literal is the argument
	synCast                 // CAST(x AS t) or x::t: typ; x is the argument
	synWindow               // TUMBLE/HOP/SESSION(ts, sizes...) outside FROM: window
	synExtract              // EXTRACT(unit FROM ts): arguments 'unit', ts
	synJSONGet              // j -> k (text false) or j ->> k (text true): arguments j, k
	synConcat               // the CONCAT function (so that || stays an operator)
	synRegexpCI             // the pattern of a ~* p: argument p
	synFullJoin             // FULL JOIN: the marker at the start of the LEFT JOIN's ON
	synAsOf                 // FOR SYSTEM_TIME AS OF e: the marker at the start of the ON; argument e
	synNulls                // NULLS FIRST | LAST: an ORDER BY item of its own after the one it orders; text true for FIRST
)

// streamSyntax is one occurrence of stream syntax the pre-pass replaced by a placeholder
// call `__rsql_N(...)`: N indexes the statement's table of them, and the entry, not the
// placeholder's name, says what the call means. Arguments that are expressions stay in the
// text as the call's arguments (the tidb parser parses them); the others are here.
type streamSyntax struct {
	kind    syntaxKind
	ms      int64      // synInterval
	param   int        // synParam: 1-based
	typ     Type       // synCast
	typName string     // synCast: PostgreSQL's name of the type as written (castColumnName)
	window  WindowKind // synWindow
	text    bool       // synJSONGet: ->> (text result)
}

// syntaxPrefix starts every placeholder call's name; the user may not write names that
// start with it.
const syntaxPrefix = "__rsql_"

// add records s and returns the name of the placeholder call that stands for it.
func (r *prepassResult) add(s streamSyntax) string {
	r.syntax = append(r.syntax, s)
	return syntaxPrefix + strconv.Itoa(len(r.syntax)-1)
}

// syntaxOf returns the stream syntax a placeholder call stands for, or nil for any other
// call.
func syntaxOf(table []streamSyntax, f *ast.FuncCallExpr) *streamSyntax {
	rest, ok := strings.CutPrefix(f.FnName.L, syntaxPrefix)
	if !ok || rest == "" || rest[0] == '0' && len(rest) > 1 {
		return nil
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= len(table) {
		return nil
	}
	return &table[i]
}

// syntaxKindOf returns the kind of stream syntax n stands for, synNone if n is not a
// placeholder call.
func syntaxKindOf(table []streamSyntax, n ast.ExprNode) (syntaxKind, *ast.FuncCallExpr) {
	f, ok := n.(*ast.FuncCallExpr)
	if !ok {
		return synNone, nil
	}
	if s := syntaxOf(table, f); s != nil {
		return s.kind, f
	}
	return synNone, f
}
