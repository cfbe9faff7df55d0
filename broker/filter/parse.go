package filter

import (
	"math"
	"strconv"
)

// MaxDepth bounds how deeply a selector nests (parentheses and prefix operators).
const MaxDepth = 100

// MaxLength bounds a selector's length in bytes.
const MaxLength = 64 << 10

// Expression is a compiled selector.
type Expression struct {
	root node
	text string
}

// Parse compiles a selector. A selector that does not compile is a *SyntaxError.
func Parse(s string) (*Expression, error) {
	if len(s) > MaxLength {
		return nil, errAt(MaxLength, "selector longer than %d bytes", MaxLength)
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, errAt(t.pos, "unexpected %s", t)
	}
	root, err := asBool(n, 0)
	if err != nil {
		return nil, err
	}
	return &Expression{root: root, text: s}, nil
}

// Match reports whether the selector is TRUE for a message whose properties get returns.
// NULL, FALSE and an evaluation error (a property that does not convert to the type it is
// compared with) do not match.
func (e *Expression) Match(get Getter) bool {
	v, err := e.root.eval(get)
	return err == nil && v.k == kBool && v.b
}

// Result is the outcome of Evaluate: True, False or Unknown (NULL).
type Result int8

// Results of Evaluate.
const (
	Unknown Result = iota
	False
	True
)

// Evaluate returns the selector's three-valued result, or the evaluation error.
func (e *Expression) Evaluate(get Getter) (Result, error) {
	v, err := e.root.eval(get)
	switch {
	case err != nil:
		return Unknown, err
	case v.k != kBool:
		return Unknown, nil
	case v.b:
		return True, nil
	}
	return False, nil
}

// String returns the selector fully parenthesised; parsing it gives the same expression.
func (e *Expression) String() string { return e.root.String() }

// Text returns the selector as written.
func (e *Expression) Text() string { return e.text }

type parser struct {
	toks  []token
	at    int
	depth int
}

func (p *parser) peek() token  { return p.toks[p.at] }
func (p *parser) peek2() token { return p.toks[min(p.at+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != tEOF {
		p.at++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == op
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		t := p.peek()
		return errAt(t.pos, "expected %q, found %s", op, t)
	}
	p.next()
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(p.peek().pos, "selector nested more than %d deep", MaxDepth)
	}
	return nil
}

// isBoolNode is RocketMQ's BooleanExpression.
func isBoolNode(n node) bool {
	switch n := n.(type) {
	case constant:
		return n.v.k == kBool || n.v.k == kNull
	case property, negate:
		return false
	}
	return true
}

// asBool is RocketMQ's asBooleanExpression: a boolean expression as is, a property cast
// to boolean, anything else an error (pos: where the expression starts).
func asBool(n node, pos int) (node, error) {
	if isBoolNode(n) {
		return n, nil
	}
	if pr, ok := n.(property); ok {
		return boolCast{pr}, nil
	}
	return nil, errAt(pos, "%s will not result in a boolean value", n)
}

func (p *parser) or() (node, error) { return p.logicChain(tOr, false, p.and) }

func (p *parser) and() (node, error) { return p.logicChain(tAnd, true, p.equality) }

// logicChain parses operands (next) joined by the operator op, left-associative; each
// operand must be boolean.
func (p *parser) logicChain(op tokKind, and bool, next func() (node, error)) (node, error) {
	pos := p.peek().pos
	l, err := next()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == op {
		p.next()
		rpos := p.peek().pos
		r, err := next()
		if err != nil {
			return nil, err
		}
		if l, err = asBool(l, pos); err != nil {
			return nil, err
		}
		if r, err = asBool(r, rpos); err != nil {
			return nil, err
		}
		l = logic{and: and, l: l, r: r}
	}
	return l, nil
}

func (p *parser) equality() (node, error) {
	pos := p.peek().pos
	l, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && (t.text == "=" || t.text == "<>"):
			p.next()
			rpos := p.peek().pos
			r, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if err := checkEqualOperand(l, pos); err != nil {
				return nil, err
			}
			if err := checkEqualOperand(r, rpos); err != nil {
				return nil, err
			}
			if lc, ok := l.(constant); ok {
				if _, rok := r.(constant); rok && isBoolNode(lc) && !isBoolNode(r) {
					return nil, errAt(pos, "%s cannot be compared with %s", l, r)
				}
			}
			var n node = comparison{op: opEq, l: l, r: r}
			if t.text == "<>" {
				n = not{n}
			}
			l = n
		case t.kind == tIs:
			p.next()
			negated := false
			if p.peek().kind == tNot {
				p.next()
				negated = true
			}
			if nt := p.next(); nt.kind != tNull {
				return nil, errAt(nt.pos, "expected NULL after IS, found %s", nt)
			}
			var n node = isNull{l}
			if negated {
				n = not{n}
			}
			l = n
		default:
			return l, nil
		}
	}
}

func checkEqualOperand(n node, pos int) error {
	if c, ok := n.(constant); ok && c.v.k == kNull {
		return errAt(pos, "NULL cannot be compared with = or <>: use IS NULL")
	}
	return nil
}

func checkLessThanOperand(n node, pos int) error {
	if c, ok := n.(constant); ok {
		if c.v.numeric() {
			return nil
		}
		return errAt(pos, "%s cannot be compared with >, >=, < or <=", n)
	}
	if isBoolNode(n) {
		return errAt(pos, "%s cannot be compared with >, >=, < or <=", n)
	}
	return nil
}

func (p *parser) comparison() (node, error) {
	pos := p.peek().pos
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		negated := false
		kind := t.kind
		if kind == tNot {
			switch p.peek2().kind {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
				p.next()
				negated = true
				kind = p.peek().kind
			default:
				return l, nil
			}
		}
		switch {
		case kind == tOp && (t.text == ">" || t.text == ">=" || t.text == "<" || t.text == "<="):
			p.next()
			rpos := p.peek().pos
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			if l, err = lessThan(map[string]cmpOp{">": opGt, ">=": opGe, "<": opLt, "<=": opLe}[t.text], l, pos, r, rpos); err != nil {
				return nil, err
			}
		case kind == tContains || kind == tStartsWith || kind == tEndsWith:
			p.next()
			st := p.next()
			if st.kind != tString {
				return nil, errAt(st.pos, "expected a string literal, found %s", st)
			}
			l = strMatch{x: l, op: kind, pattern: st.text, negate: negated}
		case kind == tBetween:
			p.next()
			lowPos := p.peek().pos
			low, err := p.unary()
			if err != nil {
				return nil, err
			}
			if at := p.next(); at.kind != tAnd {
				return nil, errAt(at.pos, "expected AND in BETWEEN, found %s", at)
			}
			highPos := p.peek().pos
			high, err := p.unary()
			if err != nil {
				return nil, err
			}
			if l, err = between(l, pos, low, lowPos, high, highPos, negated); err != nil {
				return nil, err
			}
		case kind == tIn:
			p.next()
			pr, ok := l.(property)
			if !ok {
				return nil, errAt(pos, "IN needs a property on its left, found %s", l)
			}
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			n := in{x: pr, set: map[string]bool{}, negate: negated}
			for {
				st := p.next()
				if st.kind != tString {
					return nil, errAt(st.pos, "expected a string literal in the IN list, found %s", st)
				}
				n.list = append(n.list, st.text)
				n.set[st.text] = true
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			l = n
		default:
			return l, nil
		}
	}
}

func lessThan(op cmpOp, l node, lpos int, r node, rpos int) (node, error) {
	if err := checkLessThanOperand(l, lpos); err != nil {
		return nil, err
	}
	if err := checkLessThanOperand(r, rpos); err != nil {
		return nil, err
	}
	return comparison{op: op, l: l, r: r}, nil
}

// between is x >= low AND x <= high (NOT: x < low OR x > high). Constant bounds must not
// be NULL and must be in order.
func between(x node, pos int, low node, lowPos int, high node, highPos int, negated bool) (node, error) {
	if negated {
		a, err := lessThan(opLt, x, pos, low, lowPos)
		if err != nil {
			return nil, err
		}
		b, err := lessThan(opGt, x, pos, high, highPos)
		if err != nil {
			return nil, err
		}
		return logic{and: false, l: a, r: b}, nil
	}
	lc, lok := low.(constant)
	hc, hok := high.(constant)
	if lok && hok {
		if lc.v.k == kNull || hc.v.k == kNull {
			return nil, errAt(lowPos, "BETWEEN bounds must not be NULL")
		}
		if c, err := compare(hc.v, lc.v); err == nil && c < 0 {
			return nil, errAt(lowPos, "BETWEEN %s AND %s: the lower bound is above the upper one", low, high)
		}
	}
	a, err := lessThan(opGe, x, pos, low, lowPos)
	if err != nil {
		return nil, err
	}
	b, err := lessThan(opLe, x, pos, high, highPos)
	if err != nil {
		return nil, err
	}
	return logic{and: true, l: a, r: b}, nil
}

func (p *parser) unary() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	t := p.peek()
	switch {
	case t.kind == tOp && t.text == "+":
		p.next()
		return p.unary()
	case t.kind == tOp && t.text == "-":
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return negate{x}, nil
	case t.kind == tNot:
		p.next()
		pos := p.peek().pos
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if x, err = asBool(x, pos); err != nil {
			return nil, err
		}
		return not{x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return constant{value{k: kString, s: t.text}}, nil
	case tDecimal:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, errAt(t.pos, "integer %s is out of the long range", t.text)
		}
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return constant{value{k: kInt, i: n}}, nil
		}
		return constant{value{k: kLong, i: n}}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, errAt(t.pos, "number %s is out of the double range", t.text)
		}
		return constant{value{k: kDouble, f: f}}, nil
	case tTrue:
		return constant{vTrue}, nil
	case tFalse:
		return constant{vFalse}, nil
	case tNull:
		return constant{vNull}, nil
	case tIdent:
		return property{t.text}, nil
	case tOp:
		if t.text == "(" {
			n, err := p.or()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return n, nil
		}
	}
	if t.kind == tEOF {
		return nil, errAt(t.pos, "unexpected end of input")
	}
	return nil, errAt(t.pos, "unexpected %s", t)
}
