package wat

import (
	"bytes"
	"testing"
)

// A module assembles into the bytes the binary format specifies (each byte checked by
// hand against the specification's encodings).
func TestAssembleSmallModule(t *testing.T) {
	got, err := Assemble(`(module
	  (memory (export "mem") 1)
	  (func $add (export "add") (param $a i32) (param i32) (result i32)
	    local.get $a
	    local.get 1
	    i32.add))`)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 7, 1, 0x60, 2, 0x7f, 0x7f, 1, 0x7f, // type section: (i32, i32) -> i32
		3, 2, 1, 0, // function section
		5, 3, 1, 0, 1, // memory section: min 1
		7, 13, 2, 3, 'a', 'd', 'd', 0, 0, 3, 'm', 'e', 'm', 2, 0, // exports
		10, 9, 1, 7, 0, 0x20, 0, 0x20, 1, 0x6a, 0x0b, // code
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

func TestAssembleErrors(t *testing.T) {
	for _, text := range []string{"", "(module", "(module (func i32.bogus))", "(module (func br $nowhere))",
		"(module (func block))", `(module (data (i32.const 0) "\zz"))`, "(module (table 1))", "(module) x"} {
		if _, err := Assemble(text); err == nil {
			t.Errorf("%q assembled", text)
		}
	}
}

func FuzzAssemble(f *testing.F) {
	f.Add(`(module (func (export "f") (param i64) (result i64) local.get 0 i64.const -5 i64.mul))`)
	f.Add(`(module (memory 1 2) (global $g (mut i32) (i32.const 7)) (data (i32.const 8) "hi\0a"))`)
	f.Fuzz(func(t *testing.T, text string) {
		Assemble(text) // must not panic
	})
}
