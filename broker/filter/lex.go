package filter

import (
	"fmt"
	"strings"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tDecimal
	tFloat
	tOp // = <> > >= < <= ( ) , + -
	// keywords
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith
)

var keywords = map[string]tokKind{
	"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "IN": tIn, "TRUE": tTrue,
	"FALSE": tFalse, "NULL": tNull, "IS": tIs, "CONTAINS": tContains, "STARTSWITH": tStartsWith,
	"ENDSWITH": tEndsWith,
}

type token struct {
	kind tokKind
	text string // identifier, operator, literal text; decoded value for strings
	pos  int    // byte offset in the input
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + quote(t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// SyntaxError is a selector that does not compile: Pos is the byte offset of the
// offending character (len(input) at the end).
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: invalid SQL92 selector at character %d: %s", e.Pos+1, e.Msg)
}

func errAt(pos int, f string, a ...any) *SyntaxError {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(f, a...)}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}
func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

// lex splits s into tokens.
func lex(s string) ([]token, error) {
	var out []token
	i := 0
	for {
		// Skip white space and comments.
		for i < len(s) {
			switch {
			case isSpace(s[i]):
				i++
				continue
			case strings.HasPrefix(s[i:], "--"):
				j := strings.IndexAny(s[i:], "\r\n")
				if j < 0 {
					i = len(s)
				} else {
					i += j + 1
				}
				continue
			case strings.HasPrefix(s[i:], "/*"):
				j := strings.Index(s[i+2:], "*/")
				if j < 0 {
					return nil, errAt(i, "unterminated /* comment")
				}
				i += j + 4
				continue
			}
			break
		}
		if i >= len(s) {
			return append(out, token{kind: tEOF, pos: len(s)}), nil
		}
		c := s[i]
		start := i
		switch {
		case c == '\'':
			var sb strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, errAt(start, "unterminated string literal")
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						sb.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				sb.WriteByte(s[i])
				i++
			}
			out = append(out, token{kind: tString, text: sb.String(), pos: start})
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			tok, n, err := lexNumber(s, i)
			if err != nil {
				return nil, err
			}
			out = append(out, tok)
			i += n
		case isIdentStart(c):
			for i < len(s) && isIdentPart(s[i]) {
				i++
			}
			word := s[start:i]
			if k, ok := keywords[strings.ToUpper(word)]; ok {
				out = append(out, token{kind: k, text: strings.ToUpper(word), pos: start})
			} else {
				out = append(out, token{kind: tIdent, text: word, pos: start})
			}
		default:
			op := ""
			for _, o := range []string{"<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if c >= 0x80 || c < 0x20 {
					return nil, errAt(i, "unexpected byte 0x%02X", c)
				}
				return nil, errAt(i, "unexpected character %q", c)
			}
			out = append(out, token{kind: tOp, text: op, pos: start})
			i += len(op)
		}
	}
}

// lexNumber reads a decimal literal ("0" or [1-9][0-9]* with an optional L) or a
// floating-point one (5.5, 5., .5, 5E10, 5.5e-3) at s[i:].
func lexNumber(s string, i int) (token, int, error) {
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	float := false
	if i < len(s) && s[i] == '.' {
		float = true
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			float = true
			i = j
		}
	}
	if float {
		if i < len(s) && (isIdentPart(s[i]) || s[i] == '.') {
			return token{}, 0, errAt(i, "malformed number %q", s[start:i+1])
		}
		return token{kind: tFloat, text: s[start:i], pos: start}, i - start, nil
	}
	text := s[start:i]
	if len(text) > 1 && text[0] == '0' {
		return token{}, 0, errAt(start, "malformed number %q (no leading zeros)", text)
	}
	if i < len(s) && (s[i] == 'l' || s[i] == 'L') {
		i++
	}
	if i < len(s) && isIdentPart(s[i]) {
		return token{}, 0, errAt(i, "malformed number %q", s[start:i+1])
	}
	return token{kind: tDecimal, text: text, pos: start}, i - start, nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
