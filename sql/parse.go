package sql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser
)

// Parse splits text into statements on ';' (quotes and comments respected) and parses each.
// It never panics; errors are *Error with a SQLSTATE code and, for syntax errors, the line
// and column in text.
func Parse(text string) ([]Statement, error) { return ParseParams(text, nil) }

// ParseParams is Parse with values for the $1, $2, ... (or ?) parameters of the text.
func ParseParams(text string, params []Value) ([]Statement, error) {
	return ParseLimited(text, params, DefaultLimits())
}

// ParseLimited is ParseParams under the given limits (zero fields take their defaults): a
// statement longer than lim.MaxStatementBytes, an expression nested deeper than
// lim.MaxExprDepth or larger than lim.MaxExprNodes is refused with 54001 before anything
// walks its syntax tree recursively, an INSERT with more than lim.MaxInsertRows rows with
// 54000.
func ParseLimited(text string, params []Value, lim Limits) (stmts []Statement, err error) {
	lim = lim.WithDefaults()
	defer func() {
		if r := recover(); r != nil {
			stmts = nil
			err = Errorf(CodeSyntax, "cannot parse statement: %v", r)
		}
	}()
	if maxBytes, maxTokens := lim.MaxStatementBytes, lim.maxTokens(); (maxBytes > 0 && len(text) > maxBytes) || (maxTokens > 0 && len(text) > maxTokens) {
		// Some statement may be too long or have too many tokens: find out before keeping
		// a token of it.
		if err := checkStatementSizes(text, max(maxBytes, -1), max(maxTokens, -1)); err != nil {
			return nil, err
		}
	}
	toks, lerr := lex(text)
	if lerr != nil {
		return nil, lerr
	}
	for _, st := range splitStatements(toks) {
		if err := lim.checkTokens(text, st); err != nil {
			return nil, err
		}
		p := &stmtParser{src: text, toks: st, params: params, limits: lim}
		s, perr := p.statement()
		if perr != nil {
			return nil, perr
		}
		stmts = append(stmts, s)
	}
	return stmts, nil
}

// stmtParser parses one statement's tokens. Token offsets are into src (the whole input).
type stmtParser struct {
	src    string
	toks   []token
	i      int
	params []Value
	nparam int
	wmPos  int
	limits Limits
}

func (p *stmtParser) peek() token { return p.toks[p.i] }
func (p *stmtParser) peekN(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *stmtParser) next() token {
	t := p.toks[p.i]
	if t.Kind != tokEOF {
		p.i++
	}
	return t
}

// accept consumes the bare words ws if they come next.
func (p *stmtParser) accept(ws ...string) bool {
	for k, w := range ws {
		if !p.peekN(k).is(w) {
			return false
		}
	}
	p.i += len(ws)
	return true
}

func (p *stmtParser) acceptP(s string) bool {
	if p.peek().isP(s) {
		p.i++
		return true
	}
	return false
}

func (p *stmtParser) src0() Src {
	first, last := p.toks[0], p.toks[len(p.toks)-1]
	return Src{Text: p.src[first.Pos:last.End], Pos: first.Pos}
}

// errNear is a syntax error at token t.
func (p *stmtParser) errNear(t token, want string) *Error {
	if t.Kind == tokEOF {
		return errAt(p.src, t.Pos, CodeSyntax, "syntax error at end of statement: expected %s", want)
	}
	return errAt(p.src, t.Pos, CodeSyntax, "syntax error at or near %q: expected %s", p.src[t.Pos:t.End], want)
}

func (p *stmtParser) expect(w string) error {
	if !p.accept(w) {
		return p.errNear(p.peek(), w)
	}
	return nil
}

func (p *stmtParser) expectP(s string) error {
	if !p.acceptP(s) {
		return p.errNear(p.peek(), strconv.Quote(s))
	}
	return nil
}

func (p *stmtParser) expectEnd() error {
	if t := p.peek(); t.Kind != tokEOF {
		return p.errNear(t, "end of statement")
	}
	return nil
}

// ident reads an identifier (bare word or quoted), as written.
func (p *stmtParser) ident(what string) (string, error) {
	t := p.peek()
	if t.Kind == tokIdent || (t.Kind == tokQIdent && t.Val != "") {
		p.i++
		return t.Val, nil
	}
	return "", p.errNear(t, what)
}

func (p *stmtParser) statement() (Statement, error) {
	t := p.peek()
	switch {
	case t.is("SELECT"), t.isP("("), t.is("WITH") && !p.peekN(1).isP("("):
		return p.selectFrom(p.i, p.src0())
	case t.is("CREATE"):
		return p.create()
	case t.is("INSERT"):
		return p.insert()
	case t.is("SHOW"):
		return p.show()
	case t.is("DESCRIBE"), t.is("DESC"):
		p.next()
		fn := false
		if next := p.peekN(1); next.Kind == tokIdent || next.Kind == tokQIdent {
			switch {
			case p.accept("FUNCTION"), p.accept("AGGREGATE"):
				fn = true
			case p.accept("STREAM"), p.accept("VIEW"):
			default:
				p.accept("MATERIALIZED", "VIEW")
			}
		}
		name, err := p.ident("a stream or view name")
		if err != nil {
			return nil, err
		}
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		return &Describe{Src: p.src0(), Name: name, Function: fn}, nil
	case t.is("EXPLAIN"):
		return p.explain()
	case t.is("DROP"):
		return p.drop()
	case t.is("PAUSE"), t.is("RESUME"), t.is("TERMINATE"):
		p.next()
		if err := p.expect("JOB"); err != nil {
			return nil, err
		}
		id := p.next()
		if id.Kind != tokIdent && id.Kind != tokNumber && id.Kind != tokString && id.Kind != tokQIdent {
			return nil, p.errNear(id, "a job id")
		}
		val := id.Val
		// job-3 written without quotes, as SHOW JOBS and the messages print it.
		if id.Kind == tokIdent && p.peek().isP("-") && p.peek().Pos == id.End && p.peekN(1).Kind == tokNumber && p.peekN(1).Pos == p.peek().End {
			p.next()
			val += "-" + p.next().Val
		}
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		action := JobPause
		switch {
		case t.is("RESUME"):
			action = JobResume
		case t.is("TERMINATE"):
			action = JobTerminate
		}
		return &JobControl{Src: p.src0(), Action: action, ID: val}, nil
	case t.is("SET"):
		return p.set()
	case t.is("ALTER"):
		p.next()
		if !p.accept("USER") && !p.accept("ROLE") {
			return nil, p.errNear(p.peek(), "USER")
		}
		name, password, role, err := p.userSpec()
		if err != nil {
			return nil, err
		}
		return &AlterUser{Src: p.src0(), Name: name, Password: password, Role: role}, nil
	case t.is("BEGIN"), t.is("START"), t.is("COMMIT"), t.is("END"), t.is("ROLLBACK"), t.is("ABORT"):
		return p.transaction()
	}
	return nil, p.errNear(t, "a statement (SELECT, CREATE, INSERT, SHOW, DESCRIBE, EXPLAIN, DROP, PAUSE, RESUME, TERMINATE, SET, ALTER USER)")
}

// transaction parses the transaction statements rsql accepts and ignores. BEGIN and START
// TRANSACTION may carry transaction modes (ISOLATION LEVEL ..., READ WRITE, READ ONLY,
// [NOT] DEFERRABLE), which are accepted as words; COMMIT and ROLLBACK may end in
// AND [NO] CHAIN. Savepoints are not supported.
func (p *stmtParser) transaction() (Statement, error) {
	t := p.next()
	var action TxAction
	switch {
	case t.is("BEGIN"):
		action = TxBegin
	case t.is("START"):
		if err := p.expect("TRANSACTION"); err != nil {
			return nil, err
		}
		action = TxBegin
	case t.is("COMMIT"), t.is("END"):
		action = TxCommit
	default: // ROLLBACK, ABORT: the only other words the statement switch sends here
		action = TxRollback
	}
	if !p.accept("WORK") {
		p.accept("TRANSACTION")
	}
	if action == TxBegin {
		for p.peek().Kind != tokEOF {
			n := p.next()
			if n.Kind != tokIdent && !n.isP(",") {
				return nil, p.errNear(n, "a transaction mode (ISOLATION LEVEL ..., READ WRITE, READ ONLY, DEFERRABLE)")
			}
		}
	} else {
		if p.peek().is("TO") {
			return nil, errAt(p.src, p.peek().Pos, CodeNotSupported, "savepoints are not supported: rsql has no transactions")
		}
		if p.accept("AND") {
			p.accept("NO")
			if err := p.expect("CHAIN"); err != nil {
				return nil, err
			}
		}
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	return &Transaction{Src: p.src0(), Action: action}, nil
}

func (p *stmtParser) set() (Statement, error) {
	p.next()
	p.accept("SESSION")
	name, err := p.dottedName()
	if err != nil {
		return nil, err
	}
	if !p.acceptP("=") && !p.accept("TO") {
		return nil, p.errNear(p.peek(), "= or TO")
	}
	v, err := p.optionValue()
	if err != nil {
		return nil, err
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	return &SetStmt{Src: p.src0(), Name: strings.ToLower(name), Value: v}, nil
}

// dottedName reads ident(.ident)*.
func (p *stmtParser) dottedName() (string, error) {
	name, err := p.ident("a name")
	if err != nil {
		return "", err
	}
	for p.peek().isP(".") {
		p.next()
		part, err := p.ident("a name")
		if err != nil {
			return "", err
		}
		name += "." + part
	}
	return name, nil
}

// optionValue reads a string, number (optionally signed), identifier or TRUE/FALSE.
func (p *stmtParser) optionValue() (string, error) {
	t := p.next()
	switch t.Kind {
	case tokString, tokIdent, tokQIdent:
		return t.Val, nil
	case tokNumber:
		return t.Val, nil
	case tokPunct:
		if (t.Val == "-" || t.Val == "+") && p.peek().Kind == tokNumber && p.peek().Pos == t.End {
			n := p.next()
			if t.Val == "-" {
				return "-" + n.Val, nil
			}
			return n.Val, nil
		}
	}
	return "", p.errNear(t, "a value")
}

func (p *stmtParser) show() (Statement, error) {
	p.next()
	t := p.peek()
	for _, w := range showWhats {
		if t.is(w.String()) {
			p.next()
			if err := p.expectEnd(); err != nil {
				return nil, err
			}
			return &ShowStmt{Src: p.src0(), What: w}, nil
		}
	}
	if p.accept("MATERIALIZED", "VIEWS") {
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		return &ShowStmt{Src: p.src0(), What: ShowViews}, nil
	}
	name, err := p.dottedName()
	if err != nil {
		return nil, p.errNear(t, "STREAMS, VIEWS, JOBS, UNITS, TOPICS, FUNCTIONS, USERS or a setting name")
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	return &ShowVar{Src: p.src0(), Name: strings.ToLower(name)}, nil
}

func (p *stmtParser) drop() (Statement, error) {
	p.next()
	var kind DropKind
	switch {
	case p.accept("USER"), p.accept("ROLE"):
		ifExists := p.accept("IF", "EXISTS")
		name, err := p.ident("a user name")
		if err != nil {
			return nil, err
		}
		if err := p.expectEnd(); err != nil {
			return nil, err
		}
		return &DropUser{Src: p.src0(), Name: name, IfExists: ifExists}, nil
	case p.accept("STREAM"):
		kind = DropStream
	case p.accept("TABLE"):
		kind = DropTable
	case p.accept("MATERIALIZED", "VIEW"), p.accept("VIEW"):
		kind = DropView
	case p.accept("FUNCTION"):
		kind = DropFunction
	case p.accept("AGGREGATE"):
		kind = DropAggregate
	default:
		return nil, p.errNear(p.peek(), "STREAM, TABLE, VIEW, FUNCTION, AGGREGATE or USER")
	}
	ifExists := p.accept("IF", "EXISTS")
	name, err := p.ident("a name")
	if err != nil {
		return nil, err
	}
	if (kind == DropFunction || kind == DropAggregate) && p.acceptP("(") && !p.acceptP(")") {
		for {
			if _, err := p.typeName(); err != nil {
				return nil, err
			}
			if p.acceptP(")") {
				break
			}
			if err := p.expectP(","); err != nil {
				return nil, err
			}
		}
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	return &Drop{Src: p.src0(), Kind: kind, Name: name, IfExists: ifExists}, nil
}

func (p *stmtParser) explain() (Statement, error) {
	p.next()
	inner := &stmtParser{src: p.src, toks: p.toks[p.i:], params: p.params, limits: p.limits}
	if inner.peek().Kind == tokEOF {
		return nil, p.errNear(inner.peek(), "a query to explain")
	}
	st, err := inner.statement()
	if err != nil {
		return nil, err
	}
	ex := &Explain{Src: p.src0(), Statement: st}
	switch s := st.(type) {
	case *Select:
		ex.Query = s
	case *CreateStream:
		ex.Query = s.As
	case *CreateView:
		ex.Query = s.As
	case *Insert:
		ex.Query = s.Query
	}
	if ex.Query == nil {
		first := p.toks[p.i]
		return nil, errAt(p.src, first.Pos, CodeNotSupported, "EXPLAIN takes a query (SELECT, CREATE STREAM ... AS SELECT, CREATE MATERIALIZED VIEW or INSERT INTO ... SELECT)")
	}
	return ex, nil
}

func (p *stmtParser) create() (Statement, error) {
	p.next()
	orReplace := p.accept("OR", "REPLACE")
	switch {
	case p.accept("STREAM"), p.accept("SOURCE"):
		return p.createStream(orReplace, false)
	case p.accept("TABLE"):
		return p.createStream(orReplace, true)
	case p.accept("MATERIALIZED", "VIEW"):
		return p.createView(orReplace)
	case p.peek().is("VIEW"):
		return nil, errAt(p.src, p.peek().Pos, CodeNotSupported, "plain views are not supported: use CREATE MATERIALIZED VIEW")
	case p.accept("FUNCTION"):
		return p.createFunction(orReplace, false)
	case p.accept("AGGREGATE"):
		return p.createFunction(orReplace, true)
	case p.peek().is("USER") || p.peek().is("ROLE"):
		if orReplace {
			return nil, errAt(p.src, p.peek().Pos, CodeNotSupported, "CREATE OR REPLACE USER is not supported: ALTER USER changes a user")
		}
		p.next()
		name, password, role, err := p.userSpec()
		if err != nil {
			return nil, err
		}
		return &CreateUser{Src: p.src0(), Name: name, Password: password, Role: role}, nil
	}
	return nil, p.errNear(p.peek(), "STREAM, MATERIALIZED VIEW, FUNCTION, AGGREGATE or USER")
}

// createFunction parses the rest of CREATE FUNCTION / CREATE AGGREGATE.
func (p *stmtParser) createFunction(orReplace, agg bool) (Statement, error) {
	cf := &CreateFunction{OrReplace: orReplace, Aggregate: agg, Language: "sql", BodyPos: -1, input: p.src}
	var err error
	if cf.IfNotExists, err = p.ifNotExists(orReplace); err != nil {
		return nil, err
	}
	if cf.Name, err = p.ident("a function name"); err != nil {
		return nil, err
	}
	if err := p.expectP("("); err != nil {
		return nil, err
	}
	if !p.acceptP(")") {
		for {
			nt := p.peek()
			name, err := p.ident("a parameter name")
			if err != nil {
				return nil, err
			}
			if cf.Params.Index(name) >= 0 {
				return nil, errAt(p.src, nt.Pos, CodeDuplicateColumn, "parameter %s is declared twice", name)
			}
			t, err := p.typeName()
			if err != nil {
				return nil, err
			}
			cf.Params = append(cf.Params, Column{Name: name, Type: t})
			if p.acceptP(")") {
				break
			}
			if err := p.expectP(","); err != nil {
				return nil, err
			}
		}
	}
	if err := p.expect("RETURNS"); err != nil {
		return nil, err
	}
	if p.peek().is("TABLE") && p.peekN(1).isP("(") {
		// RETURNS TABLE (c TYPE, ...): a table function.
		p.next()
		p.next()
		for {
			nt := p.peek()
			name, err := p.ident("a column name")
			if err != nil {
				return nil, err
			}
			if cf.Table.Index(name) >= 0 {
				return nil, errAt(p.src, nt.Pos, CodeDuplicateColumn, "column %s is declared twice", name)
			}
			t, err := p.typeName()
			if err != nil {
				return nil, err
			}
			cf.Table = append(cf.Table, Column{Name: name, Type: t})
			if p.acceptP(")") {
				break
			}
			if err := p.expectP(","); err != nil {
				return nil, err
			}
		}
		if agg {
			return nil, errAt(p.src, p.toks[p.i-1].Pos, CodeSyntax, "an aggregate returns one value, not a table")
		}
	} else if cf.Returns, err = p.typeName(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for p.peek().Kind != tokEOF {
		t := p.next()
		clause := strings.ToUpper(t.Val)
		if t.Kind != tokIdent || (clause != "LANGUAGE" && clause != "AS" && clause != "WITH") {
			return nil, p.errNear(t, "LANGUAGE, AS or WITH")
		}
		if seen[clause] {
			return nil, errAt(p.src, t.Pos, CodeSyntax, "%s is given twice", clause)
		}
		seen[clause] = true
		switch clause {
		case "LANGUAGE":
			l := p.next()
			if l.Kind != tokIdent && l.Kind != tokString && l.Kind != tokQIdent {
				return nil, p.errNear(l, "a language: sql, javascript or wasm")
			}
			switch lang := strings.ToLower(l.Val); lang {
			case "sql":
				cf.Language = lang
			case "javascript", "js":
				cf.Language = "javascript"
			case "wasm", "webassembly":
				cf.Language = "wasm"
			default:
				return nil, errAt(p.src, l.Pos, CodeNotSupported, "language %s is not supported: use sql, javascript or wasm", l.Val)
			}
		case "AS":
			b := p.next()
			if b.Kind != tokString {
				return nil, p.errNear(b, "the function body as a string: 'body' or $$ body $$")
			}
			cf.Body = b.Val
			cf.BodyPos = b.Pos + 1
			if p.src[b.Pos] == '$' {
				cf.BodyPos = b.Pos + len(dollarTag(p.src, b.Pos))
			}
		case "WITH":
			if cf.Options, err = p.options(); err != nil {
				return nil, err
			}
		}
	}
	if !seen["AS"] {
		return nil, p.errNear(p.peek(), "AS followed by the function body")
	}
	if cf.Options == nil {
		cf.Options = map[string]string{}
	}
	cf.Src = p.src0()
	return cf, nil
}

// userSpec parses what follows CREATE USER and ALTER USER: name [WITH] [PASSWORD 'secret']
// [ADMIN | READ ONLY | SUPERUSER | NOSUPERUSER | LOGIN], in any order, each at most once.
func (p *stmtParser) userSpec() (name string, password *string, role string, err error) {
	if name, err = p.ident("a user name"); err != nil {
		return "", nil, "", err
	}
	p.accept("WITH")
	for p.peek().Kind != tokEOF {
		t := p.peek()
		switch {
		case p.accept("PASSWORD"):
			v := p.next()
			if v.Kind != tokString {
				return "", nil, "", p.errNear(v, "the password as a string: PASSWORD 'secret'")
			}
			if password != nil {
				return "", nil, "", errAt(p.src, t.Pos, CodeSyntax, "PASSWORD is given twice")
			}
			pw := v.Val
			password = &pw
		case p.accept("ADMIN"), p.accept("SUPERUSER"):
			if role != "" {
				return "", nil, "", errAt(p.src, t.Pos, CodeSyntax, "the role is given twice")
			}
			role = "admin"
		case p.accept("READ", "ONLY"), p.accept("READ_ONLY"), p.accept("READONLY"), p.accept("NOSUPERUSER"):
			if role != "" {
				return "", nil, "", errAt(p.src, t.Pos, CodeSyntax, "the role is given twice")
			}
			role = "read_only"
		case p.accept("LOGIN"):
			// Every user may log in; accepted for PostgreSQL scripts.
		default:
			return "", nil, "", p.errNear(t, "PASSWORD 'secret', ADMIN or READ ONLY")
		}
	}
	return name, password, role, nil
}

// ifNotExists reads IF NOT EXISTS, which CREATE OR REPLACE does not take.
func (p *stmtParser) ifNotExists(orReplace bool) (bool, error) {
	t := p.peek()
	if !p.accept("IF", "NOT", "EXISTS") {
		return false, nil
	}
	if orReplace {
		return false, errAt(p.src, t.Pos, CodeSyntax, "CREATE OR REPLACE and IF NOT EXISTS cannot be combined: use one")
	}
	return true, nil
}

func (p *stmtParser) createView(orReplace bool) (Statement, error) {
	cv := &CreateView{OrReplace: orReplace}
	var err error
	if cv.IfNotExists, err = p.ifNotExists(orReplace); err != nil {
		return nil, err
	}
	name, err := p.ident("a view name")
	if err != nil {
		return nil, err
	}
	cv.Name = name
	if p.peek().is("WITH") {
		p.next()
		if cv.Options, err = p.options(); err != nil {
			return nil, err
		}
	}
	if err := p.expect("AS"); err != nil {
		return nil, err
	}
	cv.Src = p.src0()
	if cv.As, err = p.selectFrom(p.i, Src{}); err != nil {
		return nil, err
	}
	return cv, nil
}

func (p *stmtParser) createStream(orReplace, table bool) (Statement, error) {
	cs := &CreateStream{OrReplace: orReplace, Table: table}
	var err error
	if cs.IfNotExists, err = p.ifNotExists(orReplace); err != nil {
		return nil, err
	}
	name, err := p.ident("a stream name")
	if err != nil {
		return nil, err
	}
	cs.Name = name
	if p.peek().isP("(") {
		if err := p.columns(cs); err != nil {
			return nil, err
		}
	}
	if p.peek().is("WITH") {
		p.next()
		if cs.Options, err = p.options(); err != nil {
			return nil, err
		}
	}
	if cs.Options == nil {
		cs.Options = map[string]string{}
	}
	cs.Src = p.src0()
	if p.accept("AS") {
		if len(cs.Columns) > 0 {
			return nil, errAt(p.src, p.toks[p.i-1].Pos, CodeNotSupported, "a stream defined AS SELECT takes its columns from the query: drop the column list")
		}
		if cs.As, err = p.selectFrom(p.i, Src{}); err != nil {
			return nil, err
		}
		return cs, nil
	}
	if err := p.expectEnd(); err != nil {
		return nil, err
	}
	if len(cs.Columns) == 0 {
		return nil, errAt(p.src, p.toks[0].Pos, CodeSyntax, "CREATE STREAM %s needs a column list or AS SELECT", cs.Name)
	}
	if cs.Table && len(cs.PrimaryKey) == 0 {
		return nil, errAt(p.src, p.toks[0].Pos, CodeSyntax, "CREATE TABLE %s needs a PRIMARY KEY: a table holds one version of each key", cs.Name)
	}
	if !cs.Table && len(cs.PrimaryKey) > 0 {
		return nil, errAt(p.src, p.toks[0].Pos, CodeNotSupported, "a stream has no PRIMARY KEY: declare a versioned table with CREATE TABLE")
	}
	return cs, nil
}

// columns parses (name TYPE, ..., WATERMARK FOR c AS c - INTERVAL ...).
func (p *stmtParser) columns(cs *CreateStream) error {
	p.next() // (
	for {
		if p.peek().is("WATERMARK") && p.peekN(1).is("FOR") {
			if err := p.watermark(cs); err != nil {
				return err
			}
		} else if p.peek().is("PRIMARY") && p.peekN(1).is("KEY") {
			pt := p.peek()
			p.next()
			p.next()
			if len(cs.PrimaryKey) > 0 {
				return errAt(p.src, pt.Pos, CodeSyntax, "only one PRIMARY KEY is allowed")
			}
			if err := p.expectP("("); err != nil {
				return err
			}
			for {
				c, err := p.ident("a key column")
				if err != nil {
					return err
				}
				cs.PrimaryKey = append(cs.PrimaryKey, c)
				if p.acceptP(")") {
					break
				}
				if err := p.expectP(","); err != nil {
					return err
				}
			}
			p.accept("NOT", "ENFORCED")
		} else {
			nt := p.peek()
			name, err := p.ident("a column name")
			if err != nil {
				return err
			}
			if cs.Columns.Index(name) >= 0 {
				return errAt(p.src, nt.Pos, CodeDuplicateColumn, "column %s is declared twice", name)
			}
			typ, err := p.typeName()
			if err != nil {
				return err
			}
			// Tolerate NULL / NOT NULL column constraints.
			if !p.accept("NOT", "NULL") {
				p.accept("NULL")
			}
			if p.peek().is("PRIMARY") && p.peekN(1).is("KEY") {
				if len(cs.PrimaryKey) > 0 {
					return errAt(p.src, p.peek().Pos, CodeSyntax, "only one PRIMARY KEY is allowed")
				}
				p.next()
				p.next()
				p.accept("NOT", "ENFORCED")
				cs.PrimaryKey = []string{name}
			}
			cs.Columns = append(cs.Columns, Column{Name: name, Type: typ})
		}
		if p.acceptP(")") {
			break
		}
		if err := p.expectP(","); err != nil {
			return err
		}
	}
	for i, k := range cs.PrimaryKey {
		j := cs.Columns.Index(k)
		if j < 0 {
			return errAt(p.src, p.toks[p.i-1].Pos, CodeUnknownColumn, "PRIMARY KEY (%s): no such column", k)
		}
		cs.PrimaryKey[i] = cs.Columns[j].Name
	}
	if cs.WatermarkColumn != "" {
		i := cs.Columns.Index(cs.WatermarkColumn)
		if i < 0 {
			return errAt(p.src, p.wmPos, CodeUnknownColumn, "WATERMARK FOR %s: no such column", cs.WatermarkColumn)
		}
		if cs.Columns[i].Type.Kind != KindTimestamp {
			return errAt(p.src, p.wmPos, CodeTypeMismatch, "WATERMARK FOR %s: the column must be TIMESTAMP, not %s", cs.WatermarkColumn, cs.Columns[i].Type)
		}
		cs.WatermarkColumn = cs.Columns[i].Name
	}
	return nil
}

// watermark parses WATERMARK FOR c AS c [- INTERVAL ...].
func (p *stmtParser) watermark(cs *CreateStream) error {
	start := p.next()
	p.next() // FOR
	if cs.WatermarkColumn != "" {
		return errAt(p.src, start.Pos, CodeSyntax, "only one WATERMARK clause is allowed")
	}
	ct := p.peek()
	col, err := p.ident("the event-time column")
	if err != nil {
		return err
	}
	p.wmPos = ct.Pos
	if err := p.expect("AS"); err != nil {
		return err
	}
	ct2 := p.peek()
	col2, err := p.ident("the event-time column")
	if err != nil {
		return err
	}
	if !strings.EqualFold(col, col2) {
		return errAt(p.src, ct2.Pos, CodeNotSupported, "WATERMARK FOR %s AS must be %s - INTERVAL ...", col, col)
	}
	cs.WatermarkColumn = col
	if p.acceptP("-") {
		if !p.peek().is("INTERVAL") {
			return p.errNear(p.peek(), "INTERVAL")
		}
		ms, next, err := parseInterval(p.src, p.toks, p.i)
		if err != nil {
			return err
		}
		p.i = next
		if ms < 0 {
			return errAt(p.src, p.toks[p.i-1].Pos, CodeInvalidValue, "the watermark delay must not be negative")
		}
		cs.WatermarkDelay = ms
	}
	return nil
}

// typeName parses a column type: NAME [ '(' n [, n] ')' ] (DOUBLE PRECISION, CHARACTER
// VARYING are accepted).
func (p *stmtParser) typeName() (Type, error) {
	t := p.peek()
	if t.Kind != tokIdent {
		return TypeNull, p.errNear(t, "a type")
	}
	p.next()
	name := strings.ToUpper(t.Val)
	switch {
	case name == "DOUBLE" && p.accept("PRECISION"):
	case name == "CHARACTER" && p.accept("VARYING"):
		name = "VARCHAR"
	}
	prec, scale := -1, -1
	if p.acceptP("(") {
		n := p.next()
		if n.Kind != tokNumber {
			return TypeNull, p.errNear(n, "a number")
		}
		var err error
		if prec, err = strconv.Atoi(n.Val); err != nil {
			return TypeNull, p.errNear(n, "a whole number")
		}
		if p.acceptP(",") {
			m := p.next()
			if m.Kind != tokNumber {
				return TypeNull, p.errNear(m, "a number")
			}
			if scale, err = strconv.Atoi(m.Val); err != nil {
				return TypeNull, p.errNear(m, "a whole number")
			}
		}
		if err := p.expectP(")"); err != nil {
			return TypeNull, err
		}
	}
	if name == "UNSIGNED" || name == "SIGNED" {
		p.accept("INTEGER")
		p.accept("INT")
		name = "BIGINT"
	}
	typ, err := ParseType(name, prec, scale)
	if err != nil {
		e := err.(*Error)
		e.Pos = t.Pos
		e.Line, e.Column = lineCol(p.src, t.Pos)
		return TypeNull, e
	}
	return typ, nil
}

// options parses ( key = value, ... ); keys are lower-cased.
func (p *stmtParser) options() (map[string]string, error) {
	if err := p.expectP("("); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if p.acceptP(")") {
		return out, nil
	}
	for {
		kt := p.peek()
		var key string
		if kt.Kind == tokString {
			p.next()
			key = kt.Val
		} else {
			k, err := p.dottedName()
			if err != nil {
				return nil, err
			}
			key = k
		}
		key = strings.ToLower(key)
		if _, dup := out[key]; dup {
			return nil, errAt(p.src, kt.Pos, CodeInvalidValue, "option %s is given twice", key)
		}
		if err := p.expectP("="); err != nil {
			return nil, err
		}
		v, err := p.optionValue()
		if err != nil {
			return nil, err
		}
		out[key] = v
		if p.acceptP(")") {
			return out, nil
		}
		if err := p.expectP(","); err != nil {
			return nil, err
		}
	}
}

func (p *stmtParser) insert() (Statement, error) {
	p.next()
	if err := p.expect("INTO"); err != nil {
		return nil, err
	}
	ins := &Insert{Src: p.src0()}
	name, err := p.ident("a stream name")
	if err != nil {
		return nil, err
	}
	ins.Target = name
	if p.peek().isP("(") && !p.peekN(1).is("SELECT") {
		p.next()
		for {
			ct := p.peek()
			c, err := p.ident("a column name")
			if err != nil {
				return nil, err
			}
			for _, prev := range ins.Columns {
				if strings.EqualFold(prev, c) {
					return nil, errAt(p.src, ct.Pos, CodeDuplicateColumn, "column %s is listed twice", c)
				}
			}
			ins.Columns = append(ins.Columns, c)
			if p.acceptP(")") {
				break
			}
			if err := p.expectP(","); err != nil {
				return nil, err
			}
		}
	}
	switch t := p.peek(); {
	case t.is("VALUES"):
		if ins.Values, err = p.values(); err != nil {
			return nil, err
		}
	case t.is("SELECT"), t.isP("("):
		if ins.Query, err = p.selectFrom(p.i, Src{}); err != nil {
			return nil, err
		}
	default:
		return nil, p.errNear(t, "VALUES or SELECT")
	}
	return ins, nil
}

// values parses VALUES (...), ... by handing the rewritten text to the tidb parser as an
// INSERT and binding each value as a constant expression.
func (p *stmtParser) values() ([][]Expr, error) {
	start := p.i
	rw, pre, err := p.prepass(start, "INSERT INTO t ")
	if err != nil {
		return nil, err
	}
	node, err := p.tidbParse(rw)
	if err != nil {
		return nil, err
	}
	is, ok := node.(*ast.InsertStmt)
	if !ok || is.Select != nil || len(is.Lists) == 0 {
		return nil, errAt(p.src, p.toks[start].Pos, CodeSyntax, "syntax error in VALUES")
	}
	if err := p.limits.checkRows(p.src, p.toks[start].Pos, len(is.Lists)); err != nil {
		return nil, err
	}
	if err := p.limits.checkTree(p.src, p.toks[start].Pos, node); err != nil {
		return nil, err
	}
	b := &binder{input: p.src, rw: rw, params: p.params, syntax: pre.syntax, mode: modeConst}
	out := make([][]Expr, len(is.Lists))
	for i, list := range is.Lists {
		if len(list) == 0 {
			return nil, errAt(p.src, p.toks[start].Pos, CodeSyntax, "empty VALUES row")
		}
		row := make([]Expr, len(list))
		for j, n := range list {
			e, err := b.expr(n)
			if err != nil {
				return nil, err
			}
			row[j] = e
		}
		out[i] = row
	}
	return out, nil
}

// selectFrom parses the SELECT starting at token index start (through the end of the
// statement) with the pre-pass and the tidb parser.
func (p *stmtParser) selectFrom(start int, src Src) (*Select, error) {
	if p.toks[start].Kind == tokEOF {
		return nil, p.errNear(p.toks[start], "SELECT")
	}
	rw, pre, err := p.prepass(start, "")
	if err != nil {
		return nil, err
	}
	node, err := p.tidbParse(rw)
	if err != nil {
		return nil, err
	}
	first, last := p.toks[start], p.toks[len(p.toks)-1]
	if err := p.limits.checkTree(p.src, first.Pos, node); err != nil {
		return nil, err
	}
	if src.Text == "" {
		src = Src{Text: p.src[first.Pos:last.End], Pos: first.Pos}
	}
	var stmt ast.ResultSetNode
	switch n := node.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		stmt = n.(ast.ResultSetNode)
	default:
		return nil, errAt(p.src, first.Pos, CodeSyntax, "expected a SELECT")
	}
	s := &Select{Src: src, Emit: pre.emit, Params: p.params, stmt: stmt, rw: rw, input: p.src, tvfs: pre.tvfs, tfns: pre.tfns, syntax: pre.syntax, emitPos: pre.emitPos}
	s.From = firstRelation(stmt, pre.tvfs)
	return s, nil
}

// firstRelation names the first relation a statement reads by name (through a window table
// function too), or "".
func firstRelation(n ast.Node, tvfs []*windowCall) string {
	f := &relFinder{tvfs: tvfs}
	n.Accept(f)
	return f.name
}

type relFinder struct {
	tvfs []*windowCall
	name string
}

func (f *relFinder) Enter(n ast.Node) (ast.Node, bool) {
	if f.name != "" {
		return n, true
	}
	if ts, ok := n.(*ast.TableSource); ok {
		if i, ok := tvfIndex(ts.AsName.O); ok && i < len(f.tvfs) && f.tvfs[i].source != "" {
			f.name = f.tvfs[i].source
			return n, true
		}
		if tn, ok := ts.Source.(*ast.TableName); ok {
			f.name = tn.Name.O
			return n, true
		}
	}
	return n, false
}

func (f *relFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// tvfIndex returns N of an alias `__rsql_tvf_N`.
func tvfIndex(alias string) (int, bool) {
	rest, ok := strings.CutPrefix(alias, tvfAlias)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// parserPool holds tidb parsers (each is single-goroutine and costly to build).
var parserPool = sync.Pool{New: func() any {
	tp := parser.New()
	tp.SetSQLMode(mysql.ModeANSIQuotes | mysql.ModePipesAsConcat | mysql.ModeNoBackslashEscapes)
	return tp
}}

// tidbParse runs the tidb parser over the rewritten text, mapping its errors back.
func (p *stmtParser) tidbParse(rw *rewrite) (node ast.StmtNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			node = nil
			err = errAt(p.src, rw.srcStart, CodeSyntax, "cannot parse statement: %v", r)
		}
	}()
	tp := parserPool.Get().(*parser.Parser)
	nodes, _, perr := tp.Parse(rw.text, "", "")
	parserPool.Put(tp) // not reached after a panic: that parser is dropped
	if perr != nil {
		return nil, p.tidbError(rw, perr)
	}
	if len(nodes) != 1 {
		return nil, errAt(p.src, rw.srcStart, CodeSyntax, "expected one statement")
	}
	return nodes[0], nil
}

// tidbError converts a tidb syntax error ("... line L column C near "rest"") into an
// *Error positioned in the user's text.
func (p *stmtParser) tidbError(rw *rewrite, perr error) *Error {
	msg := perr.Error()
	off := len(rw.text)
	if i := strings.LastIndex(msg, ` near "`); i >= 0 {
		near := strings.TrimSuffix(strings.TrimRight(msg[i+7:], " "), `"`)
		switch {
		case near == "":
		case strings.HasSuffix(rw.text, near):
			off = len(rw.text) - len(near)
		default:
			if j := strings.Index(rw.text, near); j >= 0 {
				off = j
			}
		}
	}
	pos := rw.mapBack(off)
	at := "end of statement"
	if pos < rw.srcEnd {
		end := pos
		for end < rw.srcEnd && end < len(p.src) && p.src[end] != ' ' && p.src[end] != '\n' && p.src[end] != '\t' && end-pos < 20 {
			end++
		}
		if end == pos {
			end = pos + 1
		}
		at = fmt.Sprintf("%q", p.src[pos:end])
		w := pos
		for w < end && (p.src[w] >= 'a' && p.src[w] <= 'z' || p.src[w] >= 'A' && p.src[w] <= 'Z' || p.src[w] == '_') {
			w++
		}
		hint := ""
		if w > pos && (w == len(p.src) || !isIdentByte(p.src[w])) {
			hint = reservedHint(p.src[pos:w])
		}
		return errAt(p.src, pos, CodeSyntax, "syntax error at or near %s%s", at, hint)
	}
	return errAt(p.src, pos, CodeSyntax, "syntax error at %s", at)
}

// parseInterval parses INTERVAL at toks[i]: INTERVAL 'n' UNIT, INTERVAL n UNIT or
// INTERVAL 'n UNIT'. It returns milliseconds and the index after the literal.
func parseInterval(src string, toks []token, i int) (int64, int, error) {
	start := toks[i]
	i++
	v := toks[i]
	neg := false
	if v.isP("-") && toks[i+1].Kind == tokNumber {
		neg = true
		i++
		v = toks[i]
	}
	if v.Kind != tokString && v.Kind != tokNumber {
		return 0, 0, errAt(src, v.Pos, CodeSyntax, "INTERVAL needs a quantity such as '10' SECOND")
	}
	i++
	num := strings.TrimSpace(v.Val)
	unit := ""
	if v.Kind == tokString {
		if f := strings.Fields(num); len(f) == 2 {
			num, unit = f[0], f[1]
		}
	}
	if unit == "" {
		u := toks[i]
		if u.Kind != tokIdent {
			return 0, 0, errAt(src, u.Pos, CodeSyntax, "INTERVAL needs a unit (MILLISECOND, SECOND, MINUTE, HOUR, DAY)")
		}
		unit = u.Val
		i++
	}
	mult, ok := intervalUnits[strings.ToUpper(unit)]
	if !ok {
		return 0, 0, errAt(src, toks[i-1].Pos, CodeInvalidValue, "unknown INTERVAL unit %s (use MILLISECOND, SECOND, MINUTE, HOUR or DAY)", unit)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, 0, errAt(src, v.Pos, CodeInvalidValue, "INTERVAL quantity %q is not a number", num)
	}
	ms := f * float64(mult)
	if math.Abs(ms) > 1e15 || ms != math.Trunc(ms) {
		return 0, 0, errAt(src, start.Pos, CodeInvalidValue, "INTERVAL %s %s is out of range or not a whole number of milliseconds", num, unit)
	}
	if neg {
		ms = -ms
	}
	return int64(ms), i, nil
}

var intervalUnits = map[string]int64{
	"MILLISECOND": 1, "MILLISECONDS": 1, "MS": 1,
	"SECOND": 1000, "SECONDS": 1000, "S": 1000,
	"MINUTE": 60000, "MINUTES": 60000,
	"HOUR": 3600000, "HOURS": 3600000,
	"DAY": 86400000, "DAYS": 86400000,
}
