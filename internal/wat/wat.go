package wat

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Value types.
const (
	i32 byte = 0x7f
	i64 byte = 0x7e
	f32 byte = 0x7d
	f64 byte = 0x7c
)

var valTypes = map[string]byte{"i32": i32, "i64": i64, "f32": f32, "f64": f64}

// node is an S-expression: a list or an atom.
type node struct {
	atom string // "" for a list
	str  bool   // a "string" atom (unquoted in atom)
	list []*node
	line int
}

func (n *node) head() string {
	if n.atom == "" && len(n.list) > 0 && n.list[0].atom != "" && !n.list[0].str {
		return n.list[0].atom
	}
	return ""
}

type parser struct {
	src  string
	i    int
	line int
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("wat: line %d: %s", p.line, fmt.Sprintf(format, args...))
}

func (p *parser) skip() {
	for p.i < len(p.src) {
		c := p.src[p.i]
		switch {
		case c == '\n':
			p.line++
			p.i++
		case c == ' ' || c == '\t' || c == '\r':
			p.i++
		case strings.HasPrefix(p.src[p.i:], ";;"):
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		case strings.HasPrefix(p.src[p.i:], "(;"):
			end := strings.Index(p.src[p.i:], ";)")
			if end < 0 {
				p.i = len(p.src)
				return
			}
			p.line += strings.Count(p.src[p.i:p.i+end], "\n")
			p.i += end + 2
		default:
			return
		}
	}
}

func (p *parser) parse() (*node, error) {
	p.skip()
	if p.i >= len(p.src) {
		return nil, p.errf("unexpected end of text")
	}
	line := p.line
	switch c := p.src[p.i]; {
	case c == '(':
		p.i++
		n := &node{line: line}
		for {
			p.skip()
			if p.i >= len(p.src) {
				return nil, p.errf("unclosed ( from line %d", line)
			}
			if p.src[p.i] == ')' {
				p.i++
				return n, nil
			}
			ch, err := p.parse()
			if err != nil {
				return nil, err
			}
			n.list = append(n.list, ch)
		}
	case c == ')':
		return nil, p.errf("unexpected )")
	case c == '"':
		var b strings.Builder
		for p.i++; p.i < len(p.src) && p.src[p.i] != '"'; p.i++ {
			ch := p.src[p.i]
			if ch == '\n' {
				return nil, p.errf("newline in string")
			}
			if ch != '\\' {
				b.WriteByte(ch)
				continue
			}
			if p.i+1 >= len(p.src) {
				break
			}
			p.i++
			switch e := p.src[p.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '"', '\'':
				b.WriteByte(e)
			default:
				if p.i+1 >= len(p.src) {
					return nil, p.errf("bad escape")
				}
				v, err := strconv.ParseUint(p.src[p.i:p.i+2], 16, 8)
				if err != nil {
					return nil, p.errf("bad escape \\%s", p.src[p.i:p.i+2])
				}
				b.WriteByte(byte(v))
				p.i++
			}
		}
		if p.i >= len(p.src) {
			return nil, p.errf("unterminated string")
		}
		p.i++
		return &node{atom: b.String(), str: true, line: line}, nil
	default:
		start := p.i
		for p.i < len(p.src) && !strings.ContainsRune(" \t\r\n()\";", rune(p.src[p.i])) {
			p.i++
		}
		if p.i == start {
			return nil, p.errf("unexpected %q", p.src[p.i])
		}
		return &node{atom: p.src[start:p.i], line: line}, nil
	}
}

type funcType struct{ params, results []byte }

func (t funcType) key() string { return string(t.params) + "|" + string(t.results) }

type fn struct {
	typ     funcType
	names   map[string]int // params and locals
	locals  []byte
	export  string
	body    []*node
	name    string
	line    int
	typeIdx int
}

type global struct {
	typ  byte
	mut  bool
	init []*node
}

type module struct {
	funcs    []*fn
	funcIdx  map[string]int
	globals  []global
	globIdx  map[string]int
	memory   *[2]int64 // min, max (-1: none)
	memExp   string
	data     [][2]any // offset expression nodes, bytes
	types    []funcType
	typeKeys map[string]int
}

// Assemble assembles the module text into the binary format.
func Assemble(text string) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("wat: %v", r)
		}
	}()
	p := &parser{src: text, line: 1}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i < len(p.src) {
		return nil, p.errf("text after the module")
	}
	if root.head() != "module" {
		return nil, fmt.Errorf("wat: line %d: expected (module ...)", root.line)
	}
	m := &module{funcIdx: map[string]int{}, globIdx: map[string]int{}, typeKeys: map[string]int{}}
	for _, f := range root.list[1:] {
		if err := m.field(f); err != nil {
			return nil, err
		}
	}
	return m.encode()
}

func errAt(n *node, format string, args ...any) error {
	return fmt.Errorf("wat: line %d: %s", n.line, fmt.Sprintf(format, args...))
}

func (m *module) field(f *node) error {
	rest := f.list
	if len(rest) == 0 {
		return errAt(f, "empty field")
	}
	rest = rest[1:]
	name := ""
	if len(rest) > 0 && strings.HasPrefix(rest[0].atom, "$") {
		name, rest = rest[0].atom, rest[1:]
	}
	export := ""
	if len(rest) > 0 && rest[0].head() == "export" {
		if len(rest[0].list) != 2 || !rest[0].list[1].str {
			return errAt(rest[0], "(export \"name\")")
		}
		export, rest = rest[0].list[1].atom, rest[1:]
	}
	switch f.head() {
	case "memory":
		if m.memory != nil {
			return errAt(f, "one memory only")
		}
		lim := [2]int64{0, -1}
		for i, a := range rest {
			v, err := strconv.ParseInt(a.atom, 0, 64)
			if err != nil || i > 1 {
				return errAt(a, "memory limits are numbers of pages")
			}
			lim[i] = v
		}
		m.memory, m.memExp = &lim, export
	case "global":
		if len(rest) < 2 {
			return errAt(f, "(global $g type (init))")
		}
		g := global{}
		t := rest[0]
		if t.head() == "mut" && len(t.list) == 2 {
			g.mut, t = true, t.list[1]
		}
		vt, ok := valTypes[t.atom]
		if !ok {
			return errAt(t, "bad global type")
		}
		g.typ, g.init = vt, rest[1:]
		if len(g.init) == 1 && g.init[0].atom == "" {
			g.init = g.init[0].list // (i32.const n)
		}
		if name != "" {
			m.globIdx[name] = len(m.globals)
		}
		m.globals = append(m.globals, g)
	case "data":
		if len(rest) < 1 {
			return errAt(f, "(data (offset) \"bytes\")")
		}
		var b []byte
		for _, s := range rest[1:] {
			if !s.str {
				return errAt(s, "data is strings")
			}
			b = append(b, s.atom...)
		}
		m.data = append(m.data, [2]any{rest[0], b})
	case "func":
		fu := &fn{names: map[string]int{}, export: export, name: name, line: f.line}
		i := 0
		for ; i < len(rest) && rest[i].atom == ""; i++ {
			h := rest[i].head()
			items := rest[i].list[1:]
			switch h {
			case "param", "local":
				if len(items) == 2 && strings.HasPrefix(items[0].atom, "$") {
					vt, ok := valTypes[items[1].atom]
					if !ok {
						return errAt(rest[i], "bad type %s", items[1].atom)
					}
					if h == "param" {
						fu.names[items[0].atom] = len(fu.typ.params)
						fu.typ.params = append(fu.typ.params, vt)
					} else {
						fu.names[items[0].atom] = -1 - len(fu.locals) // fixed up below
						fu.locals = append(fu.locals, vt)
					}
					continue
				}
				for _, it := range items {
					vt, ok := valTypes[it.atom]
					if !ok {
						return errAt(it, "bad type %s", it.atom)
					}
					if h == "param" {
						fu.typ.params = append(fu.typ.params, vt)
					} else {
						fu.locals = append(fu.locals, vt)
					}
				}
			case "result":
				for _, it := range items {
					vt, ok := valTypes[it.atom]
					if !ok {
						return errAt(it, "bad type %s", it.atom)
					}
					fu.typ.results = append(fu.typ.results, vt)
				}
			default:
				return errAt(rest[i], "folded instructions are not supported: write them flat")
			}
		}
		for k, v := range fu.names {
			if v < 0 {
				fu.names[k] = len(fu.typ.params) + (-1 - v)
			}
		}
		fu.body = rest[i:]
		fu.typeIdx = m.typeOf(fu.typ)
		if name != "" {
			m.funcIdx[name] = len(m.funcs)
		}
		m.funcs = append(m.funcs, fu)
	default:
		return errAt(f, "unsupported module field %q", f.head())
	}
	return nil
}

func (m *module) typeOf(t funcType) int {
	if i, ok := m.typeKeys[t.key()]; ok {
		return i
	}
	m.typeKeys[t.key()] = len(m.types)
	m.types = append(m.types, t)
	return len(m.types) - 1
}

func uleb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func section(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = uleb(out, uint64(len(body)))
	return append(out, body...)
}

func name(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }

func (m *module) encode() ([]byte, error) {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var b []byte
	b = uleb(b, uint64(len(m.types)))
	for _, t := range m.types {
		b = append(b, 0x60)
		b = uleb(b, uint64(len(t.params)))
		b = append(b, t.params...)
		b = uleb(b, uint64(len(t.results)))
		b = append(b, t.results...)
	}
	out = section(out, 1, b)
	b = uleb(nil, uint64(len(m.funcs)))
	for _, f := range m.funcs {
		b = uleb(b, uint64(f.typeIdx))
	}
	out = section(out, 3, b)
	if m.memory != nil {
		b = uleb(nil, 1)
		if m.memory[1] >= 0 {
			b = append(b, 1)
			b = uleb(b, uint64(m.memory[0]))
			b = uleb(b, uint64(m.memory[1]))
		} else {
			b = append(b, 0)
			b = uleb(b, uint64(m.memory[0]))
		}
		out = section(out, 5, b)
	}
	if len(m.globals) > 0 {
		b = uleb(nil, uint64(len(m.globals)))
		for _, g := range m.globals {
			b = append(b, g.typ)
			if g.mut {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
			code, err := m.instrs(&fn{names: map[string]int{}}, g.init)
			if err != nil {
				return nil, err
			}
			b = append(append(b, code...), 0x0b)
		}
		out = section(out, 6, b)
	}
	var exps []byte
	n := 0
	for i, f := range m.funcs {
		if f.export != "" {
			exps = name(exps, f.export)
			exps = append(exps, 0)
			exps = uleb(exps, uint64(i))
			n++
		}
	}
	if m.memory != nil && m.memExp != "" {
		exps = name(exps, m.memExp)
		exps = append(exps, 2, 0)
		n++
	}
	out = section(out, 7, append(uleb(nil, uint64(n)), exps...))
	b = uleb(nil, uint64(len(m.funcs)))
	for _, f := range m.funcs {
		var body []byte
		body = uleb(body, uint64(len(f.locals)))
		for _, l := range f.locals {
			body = append(uleb(body, 1), l)
		}
		code, err := m.instrs(f, f.body)
		if err != nil {
			return nil, err
		}
		body = append(append(body, code...), 0x0b)
		b = uleb(b, uint64(len(body)))
		b = append(b, body...)
	}
	out = section(out, 10, b)
	if len(m.data) > 0 {
		b = uleb(nil, uint64(len(m.data)))
		for _, d := range m.data {
			off := d[0].(*node)
			if off.atom != "" {
				return nil, errAt(off, "data offset is an instruction list: (i32.const n)")
			}
			code, err := m.instrs(&fn{names: map[string]int{}}, off.list)
			if err != nil {
				return nil, err
			}
			b = append(b, 0)
			b = append(append(b, code...), 0x0b)
			bs := d[1].([]byte)
			b = uleb(b, uint64(len(bs)))
			b = append(b, bs...)
		}
		out = section(out, 11, b)
	}
	return out, nil
}

// Instructions without immediates.
var simple = map[string]byte{
	"unreachable": 0x00, "nop": 0x01, "return": 0x0f, "drop": 0x1a, "select": 0x1b,
	"i32.eqz": 0x45, "i32.eq": 0x46, "i32.ne": 0x47, "i32.lt_s": 0x48, "i32.lt_u": 0x49, "i32.gt_s": 0x4a, "i32.gt_u": 0x4b,
	"i32.le_s": 0x4c, "i32.le_u": 0x4d, "i32.ge_s": 0x4e, "i32.ge_u": 0x4f,
	"i64.eqz": 0x50, "i64.eq": 0x51, "i64.ne": 0x52, "i64.lt_s": 0x53, "i64.lt_u": 0x54, "i64.gt_s": 0x55, "i64.gt_u": 0x56,
	"i64.le_s": 0x57, "i64.le_u": 0x58, "i64.ge_s": 0x59, "i64.ge_u": 0x5a,
	"f64.eq": 0x61, "f64.ne": 0x62, "f64.lt": 0x63, "f64.gt": 0x64, "f64.le": 0x65, "f64.ge": 0x66,
	"i32.add": 0x6a, "i32.sub": 0x6b, "i32.mul": 0x6c, "i32.div_s": 0x6d, "i32.div_u": 0x6e, "i32.rem_s": 0x6f, "i32.rem_u": 0x70,
	"i32.and": 0x71, "i32.or": 0x72, "i32.xor": 0x73, "i32.shl": 0x74, "i32.shr_s": 0x75, "i32.shr_u": 0x76,
	"i64.add": 0x7c, "i64.sub": 0x7d, "i64.mul": 0x7e, "i64.div_s": 0x7f, "i64.div_u": 0x80, "i64.rem_s": 0x81, "i64.rem_u": 0x82,
	"i64.and": 0x83, "i64.or": 0x84, "i64.xor": 0x85, "i64.shl": 0x86, "i64.shr_s": 0x87, "i64.shr_u": 0x88,
	"f64.abs": 0x99, "f64.neg": 0x9a, "f64.ceil": 0x9b, "f64.floor": 0x9c, "f64.sqrt": 0x9f,
	"f64.add": 0xa0, "f64.sub": 0xa1, "f64.mul": 0xa2, "f64.div": 0xa3, "f64.min": 0xa4, "f64.max": 0xa5,
	"i32.wrap_i64": 0xa7, "i32.trunc_f64_s": 0xaa, "i64.extend_i32_s": 0xac, "i64.extend_i32_u": 0xad, "i64.trunc_f64_s": 0xb0,
	"f64.convert_i32_s": 0xb7, "f64.convert_i64_s": 0xb9,
}

// Memory instructions: opcode and natural alignment (log2).
var memOps = map[string][2]byte{
	"i32.load": {0x28, 2}, "i64.load": {0x29, 3}, "f64.load": {0x2b, 3}, "i32.load8_u": {0x2d, 0}, "i32.load8_s": {0x2c, 0},
	"i32.store": {0x36, 2}, "i64.store": {0x37, 3}, "f64.store": {0x39, 3}, "i32.store8": {0x3a, 0},
}

func (m *module) instrs(f *fn, body []*node) ([]byte, error) {
	var out []byte
	var labels []string // innermost last
	next := func(i *int, what string) (*node, error) {
		*i++
		if *i >= len(body) || body[*i].atom == "" {
			return nil, errAt(body[*i-1], "%s needs an operand", what)
		}
		return body[*i], nil
	}
	for i := 0; i < len(body); i++ {
		n := body[i]
		if n.atom == "" || n.str {
			return nil, errAt(n, "folded instructions are not supported: write them flat")
		}
		op := n.atom
		if c, ok := simple[op]; ok {
			out = append(out, c)
			continue
		}
		if mo, ok := memOps[op]; ok {
			var off, align uint64 = 0, uint64(mo[1])
			for i+1 < len(body) && body[i+1].atom != "" && (strings.HasPrefix(body[i+1].atom, "offset=") || strings.HasPrefix(body[i+1].atom, "align=")) {
				i++
				k, v, _ := strings.Cut(body[i].atom, "=")
				x, err := strconv.ParseUint(v, 0, 32)
				if err != nil {
					return nil, errAt(body[i], "bad %s", k)
				}
				if k == "offset" {
					off = x
				} else {
					align = uint64(math.Log2(float64(x)))
				}
			}
			out = append(out, mo[0])
			out = uleb(out, align)
			out = uleb(out, off)
			continue
		}
		switch op {
		case "block", "loop", "if":
			label := ""
			if i+1 < len(body) && strings.HasPrefix(body[i+1].atom, "$") {
				i++
				label = body[i].atom
			}
			bt := byte(0x40)
			if i+1 < len(body) && body[i+1].head() == "result" {
				i++
				r := body[i].list
				if len(r) != 2 {
					return nil, errAt(body[i], "one block result")
				}
				t, ok := valTypes[r[1].atom]
				if !ok {
					return nil, errAt(body[i], "bad type")
				}
				bt = t
			}
			out = append(out, map[string]byte{"block": 0x02, "loop": 0x03, "if": 0x04}[op], bt)
			labels = append(labels, label)
		case "else":
			out = append(out, 0x05)
		case "end":
			if len(labels) == 0 {
				return nil, errAt(n, "end without block")
			}
			labels = labels[:len(labels)-1]
			out = append(out, 0x0b)
		case "br", "br_if":
			a, err := next(&i, op)
			if err != nil {
				return nil, err
			}
			depth := -1
			if strings.HasPrefix(a.atom, "$") {
				for d := len(labels) - 1; d >= 0; d-- {
					if labels[d] == a.atom {
						depth = len(labels) - 1 - d
						break
					}
				}
			} else if v, err := strconv.Atoi(a.atom); err == nil {
				depth = v
			}
			if depth < 0 {
				return nil, errAt(a, "unknown label %s", a.atom)
			}
			out = append(out, map[string]byte{"br": 0x0c, "br_if": 0x0d}[op])
			out = uleb(out, uint64(depth))
		case "local.get", "local.set", "local.tee", "global.get", "global.set", "call":
			a, err := next(&i, op)
			if err != nil {
				return nil, err
			}
			names := f.names
			switch op {
			case "global.get", "global.set":
				names = m.globIdx
			case "call":
				names = m.funcIdx
			}
			idx, ok := names[a.atom]
			if !ok {
				v, err := strconv.Atoi(a.atom)
				if err != nil {
					return nil, errAt(a, "unknown %s", a.atom)
				}
				idx = v
			}
			out = append(out, map[string]byte{"local.get": 0x20, "local.set": 0x21, "local.tee": 0x22, "global.get": 0x23, "global.set": 0x24, "call": 0x10}[op])
			out = uleb(out, uint64(idx))
		case "i32.const", "i64.const":
			a, err := next(&i, op)
			if err != nil {
				return nil, err
			}
			v, err := strconv.ParseInt(strings.ReplaceAll(a.atom, "_", ""), 0, 64)
			if err != nil {
				u, uerr := strconv.ParseUint(a.atom, 0, 64)
				if uerr != nil {
					return nil, errAt(a, "bad number %s", a.atom)
				}
				v = int64(u)
			}
			if op == "i32.const" {
				out = append(out, 0x41)
				v = int64(int32(v))
			} else {
				out = append(out, 0x42)
			}
			out = sleb(out, v)
		case "f64.const":
			a, err := next(&i, op)
			if err != nil {
				return nil, err
			}
			v, err := strconv.ParseFloat(a.atom, 64)
			if err != nil {
				return nil, errAt(a, "bad number %s", a.atom)
			}
			out = append(out, 0x44)
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		case "memory.size":
			out = append(out, 0x3f, 0)
		case "memory.grow":
			out = append(out, 0x40, 0)
		default:
			return nil, errAt(n, "unsupported instruction %s", op)
		}
	}
	if len(labels) != 0 {
		return nil, fmt.Errorf("wat: %d block(s) without end", len(labels))
	}
	return out, nil
}

// MustAssemble is Assemble for text known to be valid (tests); it panics on error.
func MustAssemble(text string) []byte {
	b, err := Assemble(text)
	if err != nil {
		panic(err)
	}
	return b
}
