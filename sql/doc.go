// Package sql is rsql's SQL dialect: it parses statement text (the tidb parser behind a
// token-based pre-pass for the stream syntax), binds names and types against a Catalog, and
// compiles expressions once into closures over typed Values.
//
// Contract:
//   - Parse never panics on any input; every error is a *Error carrying a SQLSTATE code and,
//     for syntax errors, the 1-based line and column in the caller's text.
//   - Values are plain structs (no interface boxing); a compiled Expr evaluates a Row without
//     allocating unless it builds a new string.
//   - The package knows nothing about executors, state or connectors.
package sql
