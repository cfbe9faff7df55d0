// Package wat assembles a small subset of the WebAssembly text format into a binary
// module, so that tests and examples can keep wasm functions as readable .wat source
// without an external toolchain.
//
// Contract: Assemble accepts one (module ...) with memory, global, func and data fields,
// inline (export "name") on memory and func, named ($x) or numbered params, locals,
// globals, functions and block labels, and function bodies written as flat instruction
// sequences (block/loop/if ... [else ...] end; no folded expressions). Numbers are
// decimal or 0x hex. Anything else is an error naming the token and its line; Assemble
// never panics.
package wat
