package udf

import "rsql/sql"

type wasmModule struct{}

type wasmFunc struct{}

func (r *Runtime) wasmFunc(spec Spec) (*wasmFunc, error) {
	return nil, sql.Errorf(sql.CodeNotSupported, "wasm functions are not available yet")
}

func (f *wasmFunc) build(_ *sql.Call, args []sql.Evaluator) (sql.Evaluator, error) {
	return nil, sql.Errorf(sql.CodeNotSupported, "wasm functions are not available yet")
}
