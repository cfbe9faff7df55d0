// Package udf runs user-defined functions (CREATE FUNCTION, CREATE AGGREGATE;
// docs/sql.md, "User-defined functions"): SQL functions, which are inlined where they are
// called, JavaScript functions and aggregates (github.com/dop251/goja) and WebAssembly
// functions (github.com/tetratelabs/wazero).
//
// Contract:
//   - A Runtime compiles each script and module once (keyed by content) and builds the
//     sql package's definitions from a Spec: Func gives a *sql.FuncDef, Agg a *sql.AggDef,
//     TableFunc a *sql.TableFuncDef (JavaScript: the body returns an array of rows;
//     wasm: the export returns a JSON array of rows as text),
//     Check validates a Spec as CREATE must (errors positioned in the body are
//     body-relative; sql.CreateFunction.BodyError places them).
//   - What runs is made per compiled evaluator or aggregator — so per stage of a job — on
//     its first use: a JavaScript VM, a wasm module instance. Each is guarded by a mutex,
//     so it is safe even if an evaluator were shared, and released when the evaluator is
//     garbage collected.
//   - A call that throws or traps, runs past its time limit, uses more than its memory
//     limit or returns a value that does not convert gives the row an error value
//     (sql.ErrorValue: 38000, 57014, 53200, 22003); the instance is reset and the next
//     row runs normally. The limits are enforced by one watchdog goroutine (watchdog.go).
//   - Sandbox: a VM holds ECMAScript's built-ins only, cut down by a prelude (no buffers,
//     bounded built-ins); a module gets no imports and a capped memory, and is rewritten
//     when compiled to call back into Go now and then, where a call past its time limit
//     is stopped (wasmguard.go); a module with a start function is refused.
//   - A JavaScript aggregate keeps a group's state as a script value while the job runs and
//     as JSON in sql.AggState.V when the executor stores it (Encode/Decode).
package udf
