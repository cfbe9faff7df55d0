package sql

import (
	"regexp/syntax"
	"unicode/utf8"
)

// simpleRE matches a regular expression of a restricted form directly, without Go's
// general engines (whose setup costs several hundred nanoseconds per call, most of
// REGEXP_EXTRACT's cost on short texts such as Nexmark q21's URLs). The form: literals,
// single-rune classes repeated (`*`, `+`, `?`, `{m,n}`, greedy) where what may follow the
// repetition cannot begin with a rune of its class, alternations (`|`, and `?` of a group),
// capture groups, and the text-start and text-end assertions. A repetition that what
// follows cannot begin like takes every rune it can and never has to give one back, so the
// only choices are the alternations, which are tried in order: the first success is the
// match Go's leftmost-first semantics give (TestSimpleRegexpMatchesRegexp and its fuzz
// target compare them).
//
// Anything else (case folding, non-greedy repetition, repeated groups, line and word
// assertions, a literal U+FFFD, which an invalid byte would match) leaves the pattern to
// Go's regexp (newSimpleRE returns nil).
type simpleRE struct {
	prog []sop
	ncap int // capture slots: 2 × (groups + 1)
}

type sopKind uint8

const (
	sLit   sopKind = iota // lit
	sClass                // cls repeated min..max (max < 0: unbounded), greedy
	sBegin                // position 0
	sEnd                  // the text's end
	sCap                  // records the position in capture slot slot
	sAlt                  // alts tried in order, each followed by the rest
)

type sop struct {
	kind     sopKind
	lit      string
	cls      runeClass
	min, max int
	slot     int
	alts     [][]sop
}

// runeClass is a set of runes: sorted inclusive ranges, with a bitmap for ASCII.
type runeClass struct {
	ascii  [2]uint64
	ranges []rune // lo, hi pairs
}

func newRuneClass(ranges []rune) runeClass {
	c := runeClass{ranges: ranges}
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r < utf8.RuneSelf; r++ {
			c.ascii[r>>6] |= 1 << (r & 63)
		}
	}
	return c
}

func (c *runeClass) has(r rune) bool {
	if r < utf8.RuneSelf {
		return c.ascii[r>>6]&(1<<(r&63)) != 0
	}
	for i := 0; i+1 < len(c.ranges); i += 2 {
		if r < c.ranges[i] {
			return false
		}
		if r <= c.ranges[i+1] {
			return true
		}
	}
	return false
}

// newSimpleRE compiles pattern to the restricted form, or returns nil when the pattern is
// not of that form.
func newSimpleRE(pattern string) *simpleRE {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	prog, ok := compileSimple(re)
	if !ok {
		return nil
	}
	if _, ok := checkSimple(prog, nil); !ok || altDepth(prog) > maxAltDepth || 2*(re.MaxCap()+1) > maxSimpleCaps {
		return nil
	}
	return &simpleRE{prog: prog, ncap: 2 * (re.MaxCap() + 1)}
}

func compileSimple(re *syntax.Regexp) ([]sop, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return nil, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				return nil, false
			}
		}
		return []sop{{kind: sLit, lit: string(re.Rune)}}, true
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		cls, ok := simpleClass(re)
		return []sop{{kind: sClass, cls: cls, min: 1, max: 1}}, ok
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		if re.Flags&syntax.NonGreedy != 0 {
			return nil, false
		}
		if cls, ok := simpleClass(re.Sub[0]); ok {
			o := sop{kind: sClass, cls: cls, min: 0, max: -1}
			switch re.Op {
			case syntax.OpPlus:
				o.min = 1
			case syntax.OpQuest:
				o.max = 1
			case syntax.OpRepeat:
				o.min, o.max = re.Min, re.Max
			}
			return []sop{o}, true
		}
		if re.Op != syntax.OpQuest {
			return nil, false
		}
		sub, ok := compileSimple(re.Sub[0])
		return []sop{{kind: sAlt, alts: [][]sop{sub, nil}}}, ok
	case syntax.OpBeginText:
		return []sop{{kind: sBegin}}, true
	case syntax.OpEndText:
		return []sop{{kind: sEnd}}, true
	case syntax.OpCapture:
		sub, ok := compileSimple(re.Sub[0])
		out := append([]sop{{kind: sCap, slot: 2 * re.Cap}}, sub...)
		return append(out, sop{kind: sCap, slot: 2*re.Cap + 1}), ok
	case syntax.OpConcat:
		var out []sop
		for _, s := range re.Sub {
			sub, ok := compileSimple(s)
			if !ok {
				return nil, false
			}
			out = append(out, sub...)
		}
		return out, true
	case syntax.OpAlternate:
		o := sop{kind: sAlt}
		for _, s := range re.Sub {
			sub, ok := compileSimple(s)
			if !ok {
				return nil, false
			}
			o.alts = append(o.alts, sub)
		}
		return []sop{o}, true
	}
	return nil, false
}

// simpleClass is the class of a single-rune expression (a class, `.`, a one-rune literal).
func simpleClass(re *syntax.Regexp) (runeClass, bool) {
	switch re.Op {
	case syntax.OpCharClass:
		return newRuneClass(re.Rune), true
	case syntax.OpAnyChar:
		return newRuneClass([]rune{0, utf8.MaxRune}), true
	case syntax.OpAnyCharNotNL:
		return newRuneClass([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}), true
	case syntax.OpLiteral:
		if len(re.Rune) == 1 && re.Flags&syntax.FoldCase == 0 && re.Rune[0] != utf8.RuneError {
			return newRuneClass([]rune{re.Rune[0], re.Rune[0]}), true
		}
	}
	return runeClass{}, false
}

// checkSimple walks prog backwards with follow, the runes that may come after it, and
// reports the runes that may begin prog followed by follow, and whether every variable
// repetition is decided by the next rune (what follows it cannot begin with a rune of its
// class).
func checkSimple(prog []sop, follow []rune) ([]rune, bool) {
	f := follow
	for i := len(prog) - 1; i >= 0; i-- {
		o := &prog[i]
		switch o.kind {
		case sLit:
			r, _ := utf8.DecodeRuneInString(o.lit)
			f = []rune{r, r}
		case sClass:
			if o.min != o.max && rangesMeet(o.cls.ranges, f) {
				return nil, false
			}
			if o.min == 0 {
				f = append(append([]rune(nil), o.cls.ranges...), f...)
			} else {
				f = o.cls.ranges
			}
		case sAlt:
			var union []rune
			for _, a := range o.alts {
				first, ok := checkSimple(a, f)
				if !ok {
					return nil, false
				}
				union = append(union, first...)
			}
			f = union
		}
	}
	return f, true
}

// rangesMeet reports whether two lists of lo, hi pairs share a rune.
func rangesMeet(a, b []rune) bool {
	for i := 0; i+1 < len(a); i += 2 {
		for j := 0; j+1 < len(b); j += 2 {
			if a[i] <= b[j+1] && b[j] <= a[i+1] {
				return true
			}
		}
	}
	return false
}

// find is FindStringSubmatchIndex(s) of the pattern, the search starting at byte from (0,
// or a position no match can start before), written into caps (x.ncap slots). ok is false
// when the search took more steps than a few per byte of s (a class scanning far from
// every start, alternations that fail late, one after the other): the answer is then
// unknown, and Go's regexp, linear in the text, gives it.
func (x *simpleRE) find(s string, from int, caps []int) (found, ok bool) {
	m := simpleMatch{s: s, steps: simpleStepsPerByte*(len(s)-from) + simpleStepsBase}
	for pos := from; ; {
		for i := range x.ncap {
			m.caps[i] = -1
		}
		m.caps[0] = pos
		if m.run(x.prog, 0, pos) {
			copy(caps, m.caps[:x.ncap])
			return true, true
		}
		if m.steps < 0 {
			return false, false
		}
		if pos >= len(s) {
			return false, true
		}
		if s[pos] < utf8.RuneSelf {
			pos++
		} else {
			_, w := utf8.DecodeRuneInString(s[pos:])
			pos += w
		}
	}
}

// The step budget of a search: runs entered and runes a class takes.
const (
	simpleStepsPerByte = 8
	simpleStepsBase    = 256
)

// maxAltDepth bounds how deeply alternations nest in a simple pattern (the continuations
// a match keeps).
const maxAltDepth = 8

// maxSimpleCaps bounds the capture slots of a simple pattern (groups + 1, times 2).
const maxSimpleCaps = 20

type simpleMatch struct {
	s     string
	steps int // left of the search's budget; below 0, every run fails
	caps  [maxSimpleCaps]int
	// rest[d] is what follows the alternation being tried at nesting depth d.
	rest [maxAltDepth][]sop
}

// run matches seq then rest[depth-1], ..., rest[0] from pos, recording the end in caps[1].
// A failed run leaves caps and rest as it found them.
func (m *simpleMatch) run(seq []sop, depth int, pos int) bool {
	if m.steps--; m.steps < 0 {
		return false
	}
	s := m.s
	for i := range seq {
		o := &seq[i]
		switch o.kind {
		case sLit:
			if len(s)-pos < len(o.lit) || s[pos:pos+len(o.lit)] != o.lit {
				return false
			}
			pos += len(o.lit)
		case sClass:
			n := 0
			for (o.max < 0 || n < o.max) && pos < len(s) {
				r, w := rune(s[pos]), 1
				if r >= utf8.RuneSelf {
					r, w = utf8.DecodeRuneInString(s[pos:])
				}
				if !o.cls.has(r) {
					break
				}
				pos += w
				n++
			}
			if m.steps -= n; m.steps < 0 || n < o.min {
				return false
			}
		case sBegin:
			if pos != 0 {
				return false
			}
		case sEnd:
			if pos != len(s) {
				return false
			}
		case sCap:
			old := m.caps[o.slot]
			m.caps[o.slot] = pos
			if m.run(seq[i+1:], depth, pos) {
				return true
			}
			m.caps[o.slot] = old
			return false
		case sAlt:
			old := m.rest[depth]
			for _, a := range o.alts {
				m.rest[depth] = seq[i+1:]
				if m.run(a, depth+1, pos) {
					return true
				}
			}
			m.rest[depth] = old
			return false
		}
	}
	if depth > 0 {
		return m.run(m.rest[depth-1], depth-1, pos)
	}
	m.caps[1] = pos
	return true
}

// altDepth is how deeply alternations nest in prog.
func altDepth(prog []sop) int {
	d := 0
	for i := range prog {
		if prog[i].kind == sAlt {
			for _, a := range prog[i].alts {
				d = max(d, 1+altDepth(a))
			}
		}
	}
	return d
}
