package sql

import (
	"strings"
)

// tokKind is the kind of a pre-pass token.
type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokIdent          // bare word: keyword or identifier
	tokQIdent         // `quoted` or "quoted" identifier; Val is unquoted
	tokString         // 'string'; Val is unescaped
	tokNumber         // 123, 1.5, 1e3, .5
	tokPunct          // operators and punctuation; Val is the text
	tokParam          // ? or $n
)

// token is one lexeme of the pre-pass. Pos and End are byte offsets into the full input.
type token struct {
	Kind tokKind
	Val  string
	Pos  int
	End  int
}

// is reports whether t is the bare word w (case-insensitive).
func (t token) is(w string) bool { return t.Kind == tokIdent && strings.EqualFold(t.Val, w) }

// isP reports whether t is the punctuation p.
func (t token) isP(p string) bool { return t.Kind == tokPunct && t.Val == p }

// lex splits text into tokens, skipping whitespace and comments (-- to end of line, #, and
// /* */). Quotes are respected. It fails on an unterminated string, quoted identifier or
// comment, with the position where it starts.
func lex(text string) ([]token, *Error) { return scanTokens(text, true, -1, -1) }

// checkStatementSizes fails with 54001 at the first statement of text (split on ';' as
// lex splits) longer than maxBytes or of more than maxTokens tokens (a negative bound is
// none). It keeps no tokens, so refusing a huge text costs a scan of it and no memory.
func checkStatementSizes(text string, maxBytes, maxTokens int) *Error {
	_, err := scanTokens(text, false, maxBytes, maxTokens)
	return err
}

// scanTokens is lex; keep=false scans without keeping the tokens. With maxBytes or
// maxTokens >= 0 it stops with 54001 as soon as one statement (from its first token to the
// ';' after it) is longer than maxBytes or has more than maxTokens tokens.
func scanTokens(text string, keep bool, maxBytes, maxTokens int) ([]token, *Error) {
	var out []token
	stmtStart := -1 // offset of the current statement's first token; -1 before it
	tokens := 0     // tokens of the current statement
	var tooLong *Error
	emit := func(t token) {
		if maxBytes >= 0 || maxTokens >= 0 {
			if stmtStart < 0 {
				stmtStart, tokens = t.Pos, 0
			}
			tokens++
			switch {
			case tooLong != nil:
			case maxBytes >= 0 && t.End-stmtStart > maxBytes:
				tooLong = errAt(text, stmtStart, CodeTooComplex, "statement too complex: it is longer than the limit of %d bytes", maxBytes)
			case maxTokens >= 0 && tokens > maxTokens:
				tooLong = errAt(text, stmtStart, CodeTooComplex, "statement too complex: it has more than %d tokens (twice the limit of %d expression nodes)", maxTokens, maxTokens/2)
			}
			if t.Kind == tokPunct && t.Val == ";" {
				stmtStart = -1
			}
		}
		if keep {
			out = append(out, t)
		}
	}
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(text) && text[i+1] == '-', c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				return nil, errAt(text, i, CodeSyntax, "unterminated comment")
			}
			i += end + 4
		case c == '\'':
			val, end, ok := scanQuoted(text, i, '\'', false)
			if !ok {
				return nil, errAt(text, i, CodeSyntax, "unterminated string literal")
			}
			emit(token{Kind: tokString, Val: val, Pos: i, End: end})
			i = end
		case c == '`' || c == '"':
			val, end, ok := scanQuoted(text, i, c, false)
			if !ok {
				return nil, errAt(text, i, CodeSyntax, "unterminated quoted identifier")
			}
			emit(token{Kind: tokQIdent, Val: val, Pos: i, End: end})
			i = end
		case isDigit(c) || (c == '.' && i+1 < len(text) && isDigit(text[i+1])):
			j := i
			for j < len(text) && (isDigit(text[j]) || text[j] == '.') {
				j++
			}
			if j < len(text) && (text[j] == 'e' || text[j] == 'E') {
				k := j + 1
				if k < len(text) && (text[k] == '+' || text[k] == '-') {
					k++
				}
				if k < len(text) && isDigit(text[k]) {
					for k < len(text) && isDigit(text[k]) {
						k++
					}
					j = k
				}
			}
			// 0x1F, 1abc: an identifier-like tail belongs to the word.
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			emit(token{Kind: tokNumber, Val: text[i:j], Pos: i, End: j})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			emit(token{Kind: tokIdent, Val: text[i:j], Pos: i, End: j})
			i = j
		case c == '?':
			emit(token{Kind: tokParam, Val: "?", Pos: i, End: i + 1})
			i++
		case c == '$' && dollarTag(text, i) != "":
			// PostgreSQL's dollar quoting: $$ ... $$ or $tag$ ... $tag$, nothing escaped.
			tag := dollarTag(text, i)
			end := strings.Index(text[i+len(tag):], tag)
			if end < 0 {
				return nil, errAt(text, i, CodeSyntax, "unterminated dollar-quoted string (it starts with %s)", tag)
			}
			j := i + len(tag) + end
			out = append(out, token{Kind: tokString, Val: text[i+len(tag) : j], Pos: i, End: j + len(tag)})
			i = j + len(tag)
		case c == '$' && i+1 < len(text) && isDigit(text[i+1]):
			j := i + 1
			for j < len(text) && isDigit(text[j]) {
				j++
			}
			emit(token{Kind: tokParam, Val: text[i:j], Pos: i, End: j})
			i = j
		default:
			n := 1
			for _, op := range multiOps {
				if strings.HasPrefix(text[i:], op) {
					n = len(op)
					break
				}
			}
			emit(token{Kind: tokPunct, Val: text[i : i+n], Pos: i, End: i + n})
			i += n
		}
		if tooLong != nil {
			return nil, tooLong
		}
	}
	out = append(out, token{Kind: tokEOF, Pos: len(text), End: len(text)})
	return out, nil
}

// Complete reports whether text ends a statement: its last token is ';' and no string,
// quoted identifier, dollar-quoted body or comment is left open. Interactive front ends
// use it to tell a ';' that ends a statement from one inside a function body.
func Complete(text string) bool {
	toks, err := lex(text)
	if err != nil {
		return !strings.Contains(err.Message, "unterminated")
	}
	n := len(toks)
	return n >= 2 && toks[n-2].isP(";")
}

// dollarTag returns the opening tag of a dollar-quoted string at text[i] ($$ or $tag$,
// tag an identifier without $), or "".
func dollarTag(text string, i int) string {
	j := i + 1
	if j < len(text) && text[j] == '$' {
		return "$$"
	}
	if j >= len(text) || !isIdentStart(text[j]) {
		return ""
	}
	for j < len(text) && isIdentByte(text[j]) && text[j] != '$' {
		j++
	}
	if j < len(text) && text[j] == '$' {
		return text[i : j+1]
	}
	return ""
}

var multiOps = []string{"->>", "<=>", "->", "<=", ">=", "<>", "!=", "||", "&&", "::", ":=", "<<", ">>"}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80 }
func isIdentByte(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '$' }

// scanQuoted scans a quoted run starting at text[i] == q. A doubled quote stands for one;
// a backslash escapes the next byte when backslash is set (string literals do not: a backslash is
// an ordinary character, as in PostgreSQL with standard_conforming_strings). It returns the unquoted value and
// the offset after the closing quote.
func scanQuoted(text string, i int, q byte, backslash bool) (string, int, bool) {
	var b strings.Builder
	for j := i + 1; j < len(text); j++ {
		c := text[j]
		switch {
		case c == q:
			if j+1 < len(text) && text[j+1] == q {
				b.WriteByte(q)
				j++
				continue
			}
			return b.String(), j + 1, true
		case c == '\\' && backslash && j+1 < len(text):
			j++
			switch text[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			default:
				b.WriteByte(text[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// lineCol converts a byte offset of text into a 1-based line and column (columns count
// characters).
func lineCol(text string, pos int) (int, int) {
	if pos > len(text) {
		pos = len(text)
	}
	if pos < 0 {
		pos = 0
	}
	line, col := 1, 1
	for i := 0; i < pos; {
		c := text[i]
		if c == '\n' {
			line++
			col = 1
			i++
			continue
		}
		n := 1
		if c >= 0x80 {
			for n < 4 && i+n < pos && text[i+n]&0xC0 == 0x80 {
				n++
			}
		}
		i += n
		col++
	}
	return line, col
}

// errAt builds an error positioned at byte offset pos of text.
func errAt(text string, pos int, code, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Pos = pos
	e.Line, e.Column = lineCol(text, pos)
	return e
}

// splitStatements splits the token stream on ';' into statements (empty ones dropped).
// Each element is the token slice of one statement, without the ';', followed by a
// synthetic EOF token at the statement's end.
func splitStatements(toks []token) [][]token {
	var out [][]token
	start := 0
	for i, t := range toks {
		if t.isP(";") || t.Kind == tokEOF {
			if i > start {
				st := make([]token, 0, i-start+1)
				st = append(st, toks[start:i]...)
				st = append(st, token{Kind: tokEOF, Pos: toks[i-1].End, End: toks[i-1].End})
				out = append(out, st)
			}
			start = i + 1
		}
	}
	return out
}
