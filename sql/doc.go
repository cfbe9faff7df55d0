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
//
// # Parsing
//
// Parse (or ParseParams, with values for $1.. / ? parameters) splits the text on ';' with
// its own lexer (quotes and comments respected) and returns one Statement per non-empty
// statement. Each statement keeps its own text and its byte offset in the input
// (Statement.Source). The concrete types, all with exported fields:
//
//	*CreateStream  CREATE STREAM [IF NOT EXISTS] name [(col TYPE, ..., WATERMARK FOR ts AS
//	               ts - INTERVAL ...)] [WITH (k = v, ...)] [AS SELECT ...]
//	               Name, IfNotExists, Columns Schema, WatermarkColumn ("" if none),
//	               WatermarkDelay (ms), Options (lower-case keys, unquoted values; never nil),
//	               As *Select (derived stream; then Columns is empty)
//	*CreateView    CREATE MATERIALIZED VIEW [IF NOT EXISTS] name [WITH (...)] AS SELECT ...
//	               Name, IfNotExists, Options, As
//	*CreateFunction  CREATE [OR REPLACE] FUNCTION | AGGREGATE [IF NOT EXISTS] name(p TYPE, ...)
//	               RETURNS TYPE [LANGUAGE sql|javascript|wasm] AS 'body' | $$body$$ [WITH (...)]
//	               Name, Aggregate, Params, Returns, Language, Body, BodyPos, Options
//	*Insert        INSERT INTO target [(cols)] SELECT ... | VALUES (...), ...
//	               Target, Columns (nil if no list), Query *Select or Values [][]Expr
//	               (constant expressions; Insert.Rows casts them to a schema)
//	*Select        a query; Bind turns it into a *Query. From names the relation read,
//	               Emit holds the EMIT clause, Params the parameter values.
//	*ShowStmt      SHOW STREAMS | VIEWS | JOBS | UNITS | TOPICS | FUNCTIONS | USERS   What (ShowWhat)
//	*ShowVar       SHOW name                                   Name (lower case)
//	*Describe      DESCRIBE | DESC [FUNCTION] name             Name, Function
//	*Explain       EXPLAIN <query statement>                   Statement, Query *Select
//	*Drop          DROP STREAM | [MATERIALIZED] VIEW | FUNCTION | AGGREGATE [IF EXISTS] name
//	               Kind (DropKind), Name, IfExists
//	*JobControl    PAUSE | RESUME | TERMINATE JOB id           Action (JobAction), ID
//	*SetStmt       SET name = value | SET name TO value        Name (lower case), Value
//	*CreateUser    CREATE USER name [WITH] [PASSWORD 'secret'] [ADMIN | READ ONLY]
//	               Name, Password (nil if not given), Role ("admin", "read_only" or "")
//	*AlterUser     ALTER USER name [WITH] [PASSWORD 'secret'] [ADMIN | READ ONLY]  as CreateUser
//	*DropUser      DROP USER [IF EXISTS] name                  Name, IfExists
//
// # Limits
//
// ParseLimited refuses, before anything recurses over a statement's syntax tree, a
// statement longer than Limits.MaxStatementBytes (1 MiB) or with expressions nested deeper
// than MaxExprDepth (1,000) or larger than MaxExprNodes (100,000; a statement of more than
// twice as many tokens is refused before the tidb parser builds its tree): 54001 "statement
// too complex"; an INSERT with more than MaxInsertRows (10,000) VALUES rows: 54000. Parse
// and ParseParams apply the defaults. A refused huge text costs one scan of it and no
// tokens.
//
// The pre-pass rewrites what the MySQL grammar rejects (INTERVAL literals anywhere, window
// table functions in FROM, table function calls after JOIN (JOIN LATERAL f(...) AS t(c),
// JOIN UNNEST(...): a derived table the binder recognizes, the call recorded),
// TUMBLE/HOP/SESSION group-by calls, CAST to rsql's types,
// TIMESTAMP '...' literals, EMIT clauses, $n parameters, NULLS FIRST/LAST, OFFSET without
// LIMIT and FETCH FIRST, and the words PostgreSQL accepts as names that MySQL reserves —
// key, rows, rank — which it quotes where they are names: keywords.go) into text tidb accepts and keeps a
// map from every rewritten offset back to the user's text, so errors reported by tidb and
// by Bind point into what the user typed. What it replaces by a call tidb can parse (an
// INTERVAL, a parameter, a cast, a group-by window, ->, ~*, EXTRACT, CONCAT, the FULL
// JOIN and AS OF markers) is a placeholder __rsql_N(...) whose meaning is entry N of the
// statement's table of streamSyntax (a kind and its typed arguments: the interval's
// milliseconds, the parameter's number, the cast's type, the window's kind; rewrite.go,
// streamsyntax.go): the binder reads the entry, never the placeholder's name. Names
// starting with __rsql_ are reserved. Identifiers keep their spelling and compare
// case-insensitively; double quotes and backticks quote identifiers, single quotes strings.
//
// # Binding
//
// Result columns are named as PostgreSQL names them (colname.go: the alias, a column's or
// function's name, a cast's type, ?column?); names may repeat in a result, and reading a
// repeated name of a relation is ambiguous (42702). An ORDER BY item not in the select list
// becomes a hidden column of a query that Bind wraps in one dropping it (Query.Hidden).
//
// Bind(*Select, Catalog) resolves the relation, columns and functions and returns a *Query
// laid out as documented on Query: WHERE, GROUP BY keys and aggregate arguments over the
// input row; the select list and HAVING over the aggregate row (keys, window_start,
// window_end, aggregates) when the query aggregates. The window columns are reachable as
// window_start/window_end (table-valued form, also usable with the group-by form) and as
// TUMBLE_START(ts, size), TUMBLE_END, HOP_START, HOP_END, SESSION_START, SESSION_END (the
// group-by form; their arguments must match the GROUP BY window). Errors: 42P01 unknown
// stream, 42703 unknown column, 42804 type mismatch, 42803 grouping misuse (column not in
// GROUP BY, aggregate in WHERE, nested aggregates), 0A000 unsupported (joins, subqueries,
// ORDER BY, DISTINCT, UNION, OFFSET, window functions), 22023 bad constant, 42P02 missing
// parameter.
//
// # Expressions
//
// Expr nodes: *Literal, *ColumnRef (the only node that reads the row), *Call (operators and
// scalar functions, built with NewCall which type-checks), *Case, *Cast, *In, *Between,
// *Like, *IsNull. Trees are immutable; Children/WithChildren, Walk, Transform,
// ColumnsUsed and RemapColumns support rewrites. Expressions mean what they mean in
// PostgreSQL 15 (literal types, implicit casts, casts, function results and errors; the
// deliberate differences are listed in docs/sql.md and checked by the differential test
// against PostgreSQL, pgdiff_test.go).
//
// Scalar functions are registered once each (FuncDef in funcs*.go: names, type rule,
// evaluator, docs line); LookupFunc and Funcs expose the registry and FunctionTable renders
// docs/sql.md's table from it. The registry also holds the names the binder answers
// itself, so one entry says what a name is: FuncDef.Bind shapes a call from its parse
// (TRIM's FROM forms, EXTRACT's unit, ||, POSITION, IF, the TUMBLE_START window bounds,
// the session constants such as version()), and Unlisted entries (funcs_binder.go) only
// reserve such a name — FunctionTable, SHOW FUNCTIONS and DESCRIBE FUNCTION skip them and
// CheckFunctionName refuses them to user functions. Aggregates likewise (AggDef in aggs.go: name, type rule, the
// constructor of an Aggregator with Add/Merge/Result/Encode/Decode over an AggState, docs
// line; LookupAgg, Aggs, AggregateTable). A Catalog that also implements FuncCatalog
// supplies user-defined functions and aggregates, which the binder consults after the
// built-ins: a call of one is a Call with Def set (an AggCall with Def), and a SQL
// function's call is replaced by its body (FuncDef.Inline; BindFunctionBody binds a body).
// Table functions (TableFuncDef in tablefuncs.go: name, type rule giving the columns, a
// TableEvaluator builder, docs line; LookupTableFunc, TableFuncs, TableFuncTable) are
// called in FROM: the binder makes a FromLateral whose arguments are over the left side's
// row; a Catalog that implements TableFuncCatalog supplies user table functions.
// Dollar-quoted strings ($$...$$) are string literals; Complete tells whether a text ends
// a statement. Operators are typed in types.go and compiled in compile.go.
//
// Compile turns a tree into an Evaluator (func(Row) Value) once, folding constant subtrees.
// A run-time failure (division by zero, overflow, a CAST that cannot convert, an argument
// outside a function's domain) yields an error value (ErrorValue: kind NULL, carrying the
// SQLSTATE and message) that strict functions pass on like NULL and NULL-consuming
// constructs (IS NULL, COALESCE, CASE, AND/OR, IS DISTINCT FROM) pass on too; callers
// check the finished value (Value.Err, RowError) and treat the row as failed. A constant
// subtree that fails makes the whole expression fail, as PostgreSQL's planner does.
// CompileShared compiles expressions evaluated one after the other over each row (a
// filter's, then its projection's) with the costly subexpressions they share computed once
// per row, when first needed, into a Memo the operator steps through its batch (shared.go).
// CompileConds compiles an aggregation's arguments with the conditions of those that are
// CASE WHEN p THEN ... END computed once per row, eagerly, into Conds (conds.go).
//
// NUMERIC is PostgreSQL's arbitrary-precision numeric (numeric.go): values that fit an
// int64 coefficient with scale ≤ 18 live in Value.I/Scale, larger ones as decimal text in
// Value.S computed with github.com/cockroachdb/apd. NumericAdd and friends are exported for
// aggregation. Compare, Equal, HashValue/HashRow and AppendKey give the NULL-aware
// ordering, grouping equality (1.5 equals 1.50), a process-independent hash (for
// exchanges) and a byte encoding (for state keys) that agree with each other.
package sql
