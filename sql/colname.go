package sql

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// unnamedColumn is PostgreSQL's name of a result column it cannot name otherwise (an
// operator, a literal).
const unnamedColumn = "?column?"

// pgColumnName is the name PostgreSQL gives a select-list expression without an alias
// (docs/sql.md, "Result column names"): a column's own name, a function's or aggregate's
// name in lower case (count, sum, upper), the type name of a cast of something unnamed
// (int4, text), case for a CASE without a named ELSE, and ?column? for operators and
// literals. strength is 2 for a name from a column or function, 1 for a fallback name
// (a cast's type, case), 0 for ?column?; a cast and a CASE take their operand's name when
// it is stronger, as PostgreSQL does.
func (b *binder) pgColumnName(n ast.ExprNode) (name string, strength int) {
	switch x := n.(type) {
	case *ast.ParenthesesExpr:
		return b.pgColumnName(x.Expr)
	case *ast.ColumnNameExpr:
		return x.Name.Name.O, 2
	case *ast.AggregateFuncExpr:
		return strings.ToLower(x.F), 2
	case *ast.WindowFuncExpr:
		return strings.ToLower(x.Name), 2
	case *ast.FuncCallExpr:
		if s := syntaxOf(b.syntax, x); s != nil {
			switch s.kind {
			case synCast:
				if len(x.Args) == 1 {
					if name, st := b.pgColumnName(x.Args[0]); st > 1 {
						return name, st
					}
				}
				if s.typName != "" {
					return s.typName, 1
				}
				return strings.ToLower(s.typ.Kind.String()), 1
			case synInterval:
				return "interval", 1
			case synTimestamp:
				return "timestamp", 1
			case synExtract:
				return "extract", 2
			case synConcat:
				return "concat", 2
			case synWindow:
				return strings.ToLower(s.window.String()), 2
			}
			return unnamedColumn, 0
		}
		switch name := x.FnName.L; {
		case name == "concat":
			return unnamedColumn, 0 // a || b: CONCAT( itself is a placeholder (rewrite.go)
		case name == "trim":
			for _, a := range x.Args {
				if d, ok := a.(*ast.TrimDirectionExpr); ok {
					switch d.Direction {
					case ast.TrimLeading:
						return "ltrim", 2
					case ast.TrimTrailing:
						return "rtrim", 2
					}
				}
			}
			return "btrim", 2
		case strings.Contains(name, "dateliteral"):
			return "date", 1
		case strings.Contains(name, "timeliteral"):
			return "time", 1
		case strings.Contains(name, "timestampliteral"):
			return "timestamp", 1
		default:
			return name, 2
		}
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.Mod {
			// mod(a, b) is parsed as the operator a % b; PostgreSQL names the call.
			if off := x.OriginTextPosition(); off >= 0 && off+4 <= len(b.rw.text) && strings.EqualFold(b.rw.text[off:off+3], "mod") {
				if rest := strings.TrimLeft(b.rw.text[off+3:], " \t\r\n"); strings.HasPrefix(rest, "(") {
					return "mod", 2
				}
			}
		}
		return unnamedColumn, 0
	case *ast.CaseExpr:
		if x.ElseClause != nil {
			if name, st := b.pgColumnName(x.ElseClause); st > 1 {
				return name, st
			}
		}
		return "case", 1
	case *ast.ExistsSubqueryExpr:
		return "exists", 2
	case *ast.SubqueryExpr:
		if sel, ok := x.Query.(*ast.SelectStmt); ok && sel.Fields != nil && len(sel.Fields.Fields) > 0 {
			f := sel.Fields.Fields[0]
			if f.AsName.O != "" {
				return f.AsName.O, 2
			}
			if f.Expr != nil {
				return b.pgColumnName(f.Expr)
			}
		}
		return unnamedColumn, 0
	case *ast.RowExpr:
		return "row", 2
	}
	return unnamedColumn, 0
}

// castColumnName is PostgreSQL's name of a type as a cast's result column names it (int4 for
// INTEGER, float8 for DOUBLE PRECISION, varchar for CHARACTER VARYING): words are the
// first two words of the type as written.
func castColumnName(first, second string) string {
	switch f, s := strings.ToUpper(first), strings.ToUpper(second); f {
	case "BOOLEAN", "BOOL":
		return "bool"
	case "INT", "INTEGER", "INT4", "MEDIUMINT":
		return "int4"
	case "SMALLINT", "INT2", "TINYINT":
		return "int2"
	case "BIGINT", "INT8", "SIGNED", "UNSIGNED":
		return "int8"
	case "DOUBLE", "FLOAT", "FLOAT8":
		return "float8"
	case "REAL", "FLOAT4":
		return "float4"
	case "DECIMAL", "NUMERIC", "DEC":
		return "numeric"
	case "CHARACTER", "CHAR":
		if s == "VARYING" {
			return "varchar"
		}
		return "bpchar"
	case "TIMESTAMP":
		return "timestamp"
	default:
		return strings.ToLower(first)
	}
}
