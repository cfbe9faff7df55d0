package udf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Stopping a wasm call that runs past its time limit. wazero can stop calls itself
// (WithCloseOnContextDone), but it then starts a goroutine per call to watch the call's
// context, which costs more than a small function's whole call. rsql instead rewrites the
// module once, when it is compiled, so that it returns to Go now and then:
//
//   - the module gets one import, __rsql.yield() -> i32, a Go function, as function 0
//     (the module's own functions move up by one), and a mutable i32 global, the budget;
//   - every function body, every loop body (the target of the loop's back edges) and
//     every run of yieldEvery instructions without either starts with a check that
//     counts the budget down and calls yield when it is used up; yield returns a new
//     budget, or traps when the watchdog has asked the instance to stop.
//
// Machine code that never calls Go cannot be preempted: a long call would hold up the
// Go runtime's stop-the-world phases (garbage collection), and with them the watchdog that
// would stop it (wazero documents this in its design rationale, under "Why context
// cancellation is handled in Go code").
// Yielding every budget checks bounds that too. A check is two loads, a store and a
// branch; yield is a Go call every yieldBudget checks.
//
// The rewriter reads the whole instruction set wazero compiles by default (WebAssembly 2.0:
// multi-value, sign extension, saturating conversions, bulk memory, reference types,
// SIMD) plus tail calls, exceptions and threads; another instruction is an error naming
// it. Custom sections (names, DWARF) are dropped: their function indexes and code
// offsets no longer hold. A module with imports or a start function is refused (a start
// function would run when the module is instantiated, outside any call's time limit).

// Names of the import the instrumented module calls.
const (
	yieldModule = "__rsql"
	yieldName   = "yield"
)

// yieldBudget is how many checks run between two calls of yield; yieldEvery how many
// instructions run at most without a check.
const (
	yieldBudget = 1024
	yieldEvery  = 1024
)

// stopKey keys the *atomic.Bool in a call's context that the watchdog sets to stop it.
type stopKey struct{}

// errStopped is what yield panics with to stop a call (wazero turns it into the call's
// error; the caller reports the time limit).
var errStopped = errors.New("the call was stopped")

// instantiateYield adds the module instrumented modules import to rt.
func instantiateYield(rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(yieldModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			if stop, _ := ctx.Value(stopKey{}).(*atomic.Bool); stop != nil && stop.Load() {
				panic(errStopped)
			}
			stack[0] = yieldBudget
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(yieldName).Instantiate(context.Background())
	return err
}

var errTruncated = errors.New("the module is truncated")

// wasmReader reads the binary format with bounds checks: nothing it does panics.
type wasmReader struct {
	b   []byte
	pos int
	err error
}

func (r *wasmReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *wasmReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.pos {
		r.fail(errTruncated)
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

// leb reads an LEB128 number of at most bits bits (signed or not: the bytes are the same
// length either way; only the value of unsigned ones is used).
func (r *wasmReader) leb(bits int) uint64 {
	var v uint64
	for i := 0; i < (bits+6)/7; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(fmt.Errorf("an integer at byte %d is too long", r.pos))
	return 0
}

func (r *wasmReader) u32() uint32 { return uint32(r.leb(32)) }

// count reads a vector length, refusing one that cannot fit in what is left (each element
// takes at least a byte).
func (r *wasmReader) count() int {
	n := r.u32()
	if r.err == nil && int(n) > len(r.b)-r.pos {
		r.fail(fmt.Errorf("a vector of %d elements at byte %d is longer than the module", n, r.pos))
		return 0
	}
	return int(n)
}

func (r *wasmReader) name() string { return string(r.bytes(int(r.u32()))) }

// heapType skips a heap type (an s33: an abstract type byte or a type index).
func (r *wasmReader) heapType() { r.leb(33) }

// valType skips a value type.
func (r *wasmReader) valType() {
	switch c := r.byte(); c {
	case 0x63, 0x64: // (ref null ht), (ref ht)
		r.heapType()
	}
}

// blockType skips a block type: empty (0x40), a value type or a type index, all s33
// except the reference types that carry a heap type.
func (r *wasmReader) blockType() {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail(errTruncated)
		return
	}
	if c := r.b[r.pos]; c == 0x63 || c == 0x64 {
		r.pos++
		r.heapType()
		return
	}
	r.leb(33)
}

// memArg skips a memory argument: alignment (bit 6: a memory index follows) and offset.
func (r *wasmReader) memArg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32()
	}
	r.leb(64)
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func appendSection(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(content)))
	return append(out, content...)
}

// sectionRank orders the known sections as the binary format requires (custom: 0).
func sectionRank(id byte) int {
	switch id {
	case 1, 2, 3, 4, 5:
		return int(id)
	case 13: // tag
		return 6
	case 6: // global
		return 7
	case 7: // export
		return 8
	case 8: // start
		return 9
	case 9: // element
		return 10
	case 12: // data count
		return 11
	case 10: // code
		return 12
	case 11: // data
		return 13
	}
	return -1
}

// instrument returns the module with the checks described above.
func instrument(mod []byte) ([]byte, error) {
	if len(mod) < 8 || string(mod[:4]) != "\x00asm" || binary.LittleEndian.Uint32(mod[4:8]) != 1 {
		return nil, errors.New("not a WebAssembly module (version 1)")
	}
	secs := map[byte][]byte{}
	r := &wasmReader{b: mod, pos: 8}
	lastRank := 0
	for r.pos < len(mod) && r.err == nil {
		id := r.byte()
		size := r.u32()
		content := r.bytes(int(size))
		if r.err != nil || id == 0 {
			continue // custom sections are dropped
		}
		rank := sectionRank(id)
		if rank < 0 {
			return nil, fmt.Errorf("unknown section %d", id)
		}
		if rank <= lastRank {
			return nil, fmt.Errorf("section %d is out of order or repeated", id)
		}
		lastRank = rank
		secs[id] = content
	}
	if r.err != nil {
		return nil, r.err
	}
	if c, ok := secs[2]; ok {
		if sr := (&wasmReader{b: c}); sr.count() > 0 || sr.err != nil {
			return nil, errors.New("the module imports something: rsql gives modules no imports")
		}
	}
	if _, ok := secs[8]; ok {
		return nil, errors.New("the module has a start function: rsql refuses it (it would run outside the time limit of any call)")
	}
	ed := &editor{}
	// The type of yield, after the module's types.
	types, err := ed.appendToVector(secs[1], []byte{0x60, 0x00, 0x01, 0x7f})
	if err != nil {
		return nil, fmt.Errorf("type section: %v", err)
	}
	yieldType := ed.count - 1
	imports := appendU32(nil, 1)
	imports = appendName(imports, yieldModule)
	imports = appendName(imports, yieldName)
	imports = append(imports, 0x00)
	imports = appendU32(imports, uint32(yieldType))
	// The module's globals (their initializers may name functions), then the budget.
	globals, budget, err := shiftGlobals(secs[6])
	if err != nil {
		return nil, fmt.Errorf("global section: %v", err)
	}
	exports, err := shiftExports(secs[7])
	if err != nil {
		return nil, fmt.Errorf("export section: %v", err)
	}
	elems, err := shiftElements(secs[9])
	if err != nil {
		return nil, fmt.Errorf("element section: %v", err)
	}
	check := []byte{0x23}
	check = appendU32(check, budget)
	check = append(check, 0x45, 0x04, 0x40, 0x10, 0x00, 0x24) // i32.eqz if call 0 global.set
	check = appendU32(check, budget)
	check = append(check, 0x0b, 0x23) // end global.get
	check = appendU32(check, budget)
	check = append(check, 0x41, 0x01, 0x6b, 0x24) // i32.const 1 i32.sub global.set
	check = appendU32(check, budget)
	var code []byte
	if c, ok := secs[10]; ok {
		if code, err = instrumentCode(c, check); err != nil {
			return nil, err
		}
	}
	out := append([]byte(nil), mod[:8]...)
	for _, id := range []byte{1, 2, 3, 4, 5, 13, 6, 7, 9, 12, 10, 11} {
		switch id {
		case 1:
			out = appendSection(out, 1, types)
		case 2:
			out = appendSection(out, 2, imports)
		case 6:
			out = appendSection(out, 6, globals)
		case 7:
			if exports != nil {
				out = appendSection(out, 7, exports)
			}
		case 9:
			if elems != nil {
				out = appendSection(out, 9, elems)
			}
		case 10:
			if code != nil {
				out = appendSection(out, 10, code)
			}
		default:
			if c, ok := secs[id]; ok {
				out = appendSection(out, id, c)
			}
		}
	}
	return out, nil
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// editor holds what appendToVector found.
type editor struct{ count int }

// appendToVector returns the vector section content sec (nil: none) with elem appended;
// e.count is the new length.
func (e *editor) appendToVector(sec, elem []byte) ([]byte, error) {
	r := &wasmReader{b: sec}
	n := 0
	if sec != nil {
		n = r.count()
	}
	if r.err != nil {
		return nil, r.err
	}
	e.count = n + 1
	out := appendU32(nil, uint32(n+1))
	out = append(out, sec[r.pos:]...)
	return append(out, elem...), nil
}

// shiftConstExpr copies a constant expression (through its end) moving function indexes
// up by one.
func shiftConstExpr(out []byte, r *wasmReader) ([]byte, error) {
	for r.err == nil {
		at := r.pos
		op := r.byte()
		if op == 0xd2 { // ref.func
			out = append(out, op)
			out = appendU32(out, r.u32()+1)
			continue
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, err
		}
		out = append(out, r.b[at:r.pos]...)
		if op == 0x0b {
			return out, r.err
		}
	}
	return nil, r.err
}

// shiftGlobals returns the global section with function indexes moved and the budget
// global appended, and the budget's index.
func shiftGlobals(sec []byte) ([]byte, uint32, error) {
	r := &wasmReader{b: sec}
	n := 0
	if sec != nil {
		n = r.count()
	}
	out := appendU32(nil, uint32(n+1))
	var err error
	for i := 0; i < n && r.err == nil; i++ {
		at := r.pos
		r.valType()
		r.byte() // mutability
		out = append(out, r.b[at:r.pos]...)
		if out, err = shiftConstExpr(out, r); err != nil {
			return nil, 0, err
		}
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	out = append(out, 0x7f, 0x01, 0x41) // mut i32 = i32.const budget
	out = appendS32(out, yieldBudget)
	out = append(out, 0x0b)
	return out, uint32(n), nil
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// shiftExports moves the indexes of exported functions up by one.
func shiftExports(sec []byte) ([]byte, error) {
	if sec == nil {
		return nil, nil
	}
	r := &wasmReader{b: sec}
	n := r.count()
	out := appendU32(nil, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		name := r.name()
		kind := r.byte()
		idx := r.u32()
		if kind == 0 {
			idx++
		}
		out = appendName(out, name)
		out = append(out, kind)
		out = appendU32(out, idx)
	}
	return out, r.err
}

// shiftElements moves the function indexes of element segments up by one.
func shiftElements(sec []byte) ([]byte, error) {
	if sec == nil {
		return nil, nil
	}
	r := &wasmReader{b: sec}
	n := r.count()
	out := appendU32(nil, uint32(n))
	var err error
	for i := 0; i < n && r.err == nil; i++ {
		flags := r.u32()
		out = appendU32(out, flags)
		if flags > 7 {
			return nil, fmt.Errorf("segment %d: flags %d", i, flags)
		}
		if flags&1 == 0 && flags&2 != 0 { // active with a table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: the offset
			if out, err = shiftConstExpr(out, r); err != nil {
				return nil, err
			}
		}
		if flags&3 != 0 { // an element kind (0x00) or a reference type
			at := r.pos
			if flags&4 != 0 {
				r.valType()
			} else {
				r.byte()
			}
			out = append(out, r.b[at:r.pos]...)
		}
		m := r.count()
		out = appendU32(out, uint32(m))
		for j := 0; j < m && r.err == nil; j++ {
			if flags&4 != 0 {
				if out, err = shiftConstExpr(out, r); err != nil {
					return nil, err
				}
			} else {
				out = appendU32(out, r.u32()+1)
			}
		}
	}
	if r.err == nil && r.pos != len(sec) {
		return nil, errors.New("bytes after the last segment")
	}
	return out, r.err
}

// instrumentCode rewrites the code section: the checks, and function indexes moved up.
func instrumentCode(sec []byte, check []byte) ([]byte, error) {
	r := &wasmReader{b: sec}
	n := r.count()
	out := appendU32(make([]byte, 0, len(sec)+n*(len(check)+2)), uint32(n))
	var body []byte
	for i := 0; i < n && r.err == nil; i++ {
		size := int(r.u32())
		b := r.bytes(size)
		if r.err != nil {
			break
		}
		var err error
		body, err = instrumentBody(body[:0], b, check)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %v", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil {
		return nil, fmt.Errorf("code section: %v", r.err)
	}
	if r.pos != len(sec) {
		return nil, errors.New("code section: bytes after the last function body")
	}
	return out, nil
}

// instrumentBody appends body (locals and expression) to out with the checks inserted
// and function indexes moved up by one.
func instrumentBody(out, body, check []byte) ([]byte, error) {
	r := &wasmReader{b: body}
	groups := r.count()
	for g := 0; g < groups && r.err == nil; g++ {
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %v", r.err)
	}
	out = append(out, body[:r.pos]...)
	out = append(out, check...)
	since := 0 // instructions since the last check
	for r.pos < len(body) && r.err == nil {
		if since >= yieldEvery {
			out = append(out, check...)
			since = 0
		}
		at := r.pos
		op := r.byte()
		since++
		switch op {
		case 0x10, 0x12, 0xd2: // call, return_call, ref.func
			out = append(out, op)
			out = appendU32(out, r.u32()+1)
			continue
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, fmt.Errorf("byte %d: %v", at, err)
		}
		out = append(out, body[at:r.pos]...)
		if op == 0x03 { // loop: the check starts its body
			out = append(out, check...)
			since = 0
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// skipImmediates moves r past the immediates of instruction op.
func skipImmediates(r *wasmReader, op byte) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0a, op == 0x0b, op == 0x0f, op == 0x19, op == 0x1a, op == 0x1b,
		op == 0xd1, op == 0xd3, op == 0xd4, op >= 0x45 && op <= 0xc4:
		// no immediates
	case op == 0x02, op == 0x03, op == 0x04, op == 0x06: // block, loop, if, try
		r.blockType()
	case op == 0x07, op == 0x08, op == 0x09, op == 0x0c, op == 0x0d, op == 0x10, op == 0x12, op == 0x14, op == 0x15,
		op == 0x18, op >= 0x20 && op <= 0x26, op == 0xd2, op == 0xd5, op == 0xd6:
		r.u32() // an index or a label
	case op == 0x0e: // br_table
		n := r.count()
		for i := 0; i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			r.valType()
		}
	case op == 0x1f: // try_table bt catch*
		r.blockType()
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			switch k := r.byte(); k {
			case 0x00, 0x01:
				r.u32()
				r.u32()
			case 0x02, 0x03:
				r.u32()
			default:
				if r.err == nil {
					return fmt.Errorf("try_table catch kind %d", k)
				}
			}
		}
	case op >= 0x28 && op <= 0x3e:
		r.memArg()
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41:
		r.leb(32)
	case op == 0x42:
		r.leb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null ht
		r.heapType()
	case op == 0xfc:
		switch sub := r.u32(); {
		case r.err != nil, sub <= 7:
		case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
			r.u32()
		default:
			return fmt.Errorf("instruction 0xfc %d is not supported", sub)
		}
	case op == 0xfd: // SIMD
		switch sub := r.u32(); {
		case r.err != nil:
		case sub <= 11, sub == 92, sub == 93:
			r.memArg()
		case sub == 12, sub == 13:
			r.bytes(16)
		case sub >= 21 && sub <= 34:
			r.byte()
		case sub >= 84 && sub <= 91:
			r.memArg()
			r.byte()
		case sub <= 0x113:
			// no immediates
		default:
			return fmt.Errorf("instruction 0xfd %d is not supported", sub)
		}
	case op == 0xfe: // threads
		switch sub := r.u32(); {
		case r.err != nil:
		case sub == 3:
			r.byte()
		case sub <= 2, sub >= 0x10 && sub <= 0x4e:
			r.memArg()
		default:
			return fmt.Errorf("instruction 0xfe %d is not supported", sub)
		}
	default:
		if r.err == nil {
			return fmt.Errorf("instruction 0x%02x is not supported", op)
		}
	}
	return r.err
}
