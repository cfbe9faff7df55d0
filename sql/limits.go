package sql

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// SQLSTATE code of the statement limits (docs/security.md, "Limits"); CodeTooComplex is
// in codes.go.
const (
	CodeProgramLimit = "54000" // more INSERT rows than one statement may carry
)

// Limits bound what one statement may cost to parse and bind, so that a hostile or
// runaway statement fails on its own instead of exhausting the process's stack or memory.
// A zero field takes its default (DefaultLimits); a negative one turns that limit off.
type Limits struct {
	// MaxStatementBytes is the longest statement text, in bytes (default 1 MiB).
	MaxStatementBytes int
	// MaxExprDepth is the deepest nesting of a statement's syntax tree (default 1,000):
	// 1+1+...+1 with n terms nests n deep.
	MaxExprDepth int
	// MaxExprNodes is the most nodes a statement's syntax tree may have (default 100,000);
	// a statement of more than twice as many tokens is refused before it is parsed.
	MaxExprNodes int
	// MaxInsertRows is the most rows one INSERT ... VALUES may carry (default 10,000).
	MaxInsertRows int
}

// Defaults of Limits.
const (
	DefaultMaxStatementBytes = 1 << 20
	DefaultMaxExprDepth      = 1000
	DefaultMaxExprNodes      = 100_000
	DefaultMaxInsertRows     = 10_000
)

// DefaultLimits returns the limits Parse and ParseParams apply.
func DefaultLimits() Limits { return Limits{}.WithDefaults() }

// WithDefaults fills the zero fields of l with their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxStatementBytes == 0 {
		l.MaxStatementBytes = DefaultMaxStatementBytes
	}
	if l.MaxExprDepth == 0 {
		l.MaxExprDepth = DefaultMaxExprDepth
	}
	if l.MaxExprNodes == 0 {
		l.MaxExprNodes = DefaultMaxExprNodes
	}
	if l.MaxInsertRows == 0 {
		l.MaxInsertRows = DefaultMaxInsertRows
	}
	return l
}

// maxTokens is the most tokens a statement may have: twice MaxExprNodes (the tidb parser
// takes about 1 KB per token to build a tree; no statement of ordinary SQL within the node
// limit has that many). 0 when the node limit is off.
func (l Limits) maxTokens() int {
	if l.MaxExprNodes <= 0 {
		return 0
	}
	return 2 * l.MaxExprNodes
}

// checkTokens refuses a statement of more than maxTokens tokens before the tidb parser
// builds its tree.
func (l Limits) checkTokens(src string, toks []token) error {
	if n, max := len(toks)-1, l.maxTokens(); max > 0 && n > max {
		return errAt(src, toks[0].Pos, CodeTooComplex, "statement too complex: it has more than %d tokens (twice the limit of %d expression nodes)", max, l.MaxExprNodes)
	}
	return nil
}

// checkTree refuses a syntax tree deeper or larger than the limits. It runs after the tidb
// parser (which builds any tree without recursing) and before anything that walks the tree
// recursively (the binder, the planner, the expression compiler), so their recursion is
// bounded by MaxExprDepth. Its own walk uses tidb's Accept, which recurses once per level:
// the visitor stops descending at MaxExprDepth + 1 levels and unwinds at once when a limit
// is passed, so the walk itself never goes deeper than the limit allows.
func (l Limits) checkTree(src string, pos int, n ast.Node) error {
	if n == nil || (l.MaxExprDepth < 0 && l.MaxExprNodes < 0) {
		return nil
	}
	v := &limitVisitor{maxDepth: l.MaxExprDepth, maxNodes: l.MaxExprNodes}
	n.Accept(v)
	switch {
	case v.tooDeep:
		return errAt(src, pos, CodeTooComplex, "statement too complex: its expressions nest more than %d levels deep", l.MaxExprDepth)
	case v.tooMany:
		return errAt(src, pos, CodeTooComplex, "statement too complex: it has more than %d expression nodes", l.MaxExprNodes)
	}
	return nil
}

// checkRows refuses an INSERT with more VALUES rows than the limit.
func (l Limits) checkRows(src string, pos, rows int) error {
	if l.MaxInsertRows > 0 && rows > l.MaxInsertRows {
		return errAt(src, pos, CodeProgramLimit, "INSERT has %d VALUES rows, more than the limit of %d per statement: split it", rows, l.MaxInsertRows)
	}
	return nil
}

// limitVisitor counts the nodes and tracks the depth of a tidb syntax tree. Once a limit is
// passed it skips every child and stops the walk (Leave reports false, which makes every
// Accept above return at once).
type limitVisitor struct {
	maxDepth, maxNodes int // negative: no limit
	depth, nodes       int
	tooDeep, tooMany   bool
}

func (v *limitVisitor) Enter(n ast.Node) (ast.Node, bool) {
	if v.tooDeep || v.tooMany {
		return n, true
	}
	v.depth++
	v.nodes++
	if v.maxDepth >= 0 && v.depth > v.maxDepth {
		v.tooDeep = true
		return n, true
	}
	if v.maxNodes >= 0 && v.nodes > v.maxNodes {
		v.tooMany = true
		return n, true
	}
	return n, false
}

func (v *limitVisitor) Leave(n ast.Node) (ast.Node, bool) {
	v.depth--
	return n, !v.tooDeep && !v.tooMany
}

// String describes l for messages and logs.
func (l Limits) String() string {
	return fmt.Sprintf("statement %d bytes, depth %d, %d nodes, %d INSERT rows", l.MaxStatementBytes, l.MaxExprDepth, l.MaxExprNodes, l.MaxInsertRows)
}
