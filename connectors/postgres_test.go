package connectors

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rsql/internal/pgtest"
	"rsql/sql"
)

func TestParsePostgresOptions(t *testing.T) {
	o, err := ParsePostgresOptions("Dim_Users", map[string]string{"url": "postgres://u@127.0.0.1:5432/db"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Target != "dim_users" || o.CacheTTL != DefaultCacheTTL || o.CacheRows != DefaultCacheRows ||
		o.Timeout != DefaultLookupTimeout || o.MaxRetries != 0 || o.BackoffMax != DefaultBackoffMax {
		t.Errorf("defaults: %+v", o)
	}
	o, err = ParsePostgresOptions("d", map[string]string{"url": "host=db dbname=shop", "table": `crm."Users"`,
		"cache_ttl": "0", "cache_rows": "10", "lookup_timeout": "250ms", "max_retries": "3", "retry_backoff_max": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Table, "|") != "crm|Users" || o.Target != `crm."Users"` || o.CacheTTL != 0 || o.CacheRows != 10 ||
		o.Timeout != 250*time.Millisecond || o.MaxRetries != 3 || o.BackoffMax != 2*time.Second {
		t.Errorf("parsed %+v", o)
	}
	for _, c := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{}, "needs a url option"},
		{map[string]string{"url": "postgres://u:secret@h:notaport/db"}, `url = "postgres://u:xxxxx@h:notaport/db"`},
		{map[string]string{"url": "host=h port=x password=secret"}, `url = "host=h port=x password=xxxxx"`},
		{map[string]string{"url": "postgres://h/db", "table": "a.b.c"}, `table = "a.b.c": want [schema.]table`},
		{map[string]string{"url": "postgres://h/db", "table": "us ers"}, `table = "us ers"`},
		{map[string]string{"url": "postgres://h/db", "table": `"open`}, "unterminated"},
		{map[string]string{"url": "postgres://h/db", "table": ""}, `table = ""`},
		{map[string]string{"url": "postgres://h/db", "cache_ttl": "a minute"}, `cache_ttl = "a minute": want a duration`},
		{map[string]string{"url": "postgres://h/db", "cache_ttl": "-1s"}, `cache_ttl = "-1s"`},
		{map[string]string{"url": "postgres://h/db", "cache_rows": "0"}, `cache_rows = "0": want a whole number from 1`},
		{map[string]string{"url": "postgres://h/db", "lookup_timeout": "0s"}, `lookup_timeout = "0s"`},
		{map[string]string{"url": "postgres://h/db", "max_retries": "-1"}, `max_retries = "-1"`},
		{map[string]string{"url": "postgres://h/db", "retry_backoff_max": "1ms"}, `retry_backoff_max = "1ms"`},
	} {
		_, err := ParsePostgresOptions("d", c.opts)
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want an *OptionError containing %q", c.opts, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%v: the error shows the password: %v", c.opts, err)
		}
	}
	// The registry checks a CREATE TABLE's options through the connector.
	if _, err := ParseStreamOptions(map[string]string{"connector": "postgres", "url": "postgres://h/db", "cache_rows": "many"}); err == nil || !strings.Contains(err.Error(), "cache_rows") {
		t.Errorf("ParseStreamOptions: %v", err)
	}
	if _, err := ParseStreamOptions(map[string]string{"connector": "postgres", "url": "postgres://h/db", "table": "users", "cache_ttl": "5s"}); err != nil {
		t.Errorf("ParseStreamOptions: %v", err)
	}
	k, _ := Lookup("postgres")
	if !k.Lookupable || !k.Writable || k.Readable {
		t.Error("the postgres connector should be looked up and written, not read as a stream")
	}
}

func TestDecodePGText(t *testing.T) {
	dec := sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}
	for _, c := range []struct {
		in   string
		t    sql.Type
		want sql.Value
		code string
	}{
		{"gold", sql.TypeVarchar, sql.Varchar("gold"), ""},
		{"42", sql.TypeInt, sql.Int(42), ""},
		{"-9223372036854775808", sql.TypeBigInt, sql.BigInt(-9223372036854775808), ""},
		{"12.50", sql.TypeBigInt, sql.BigInt(13), ""}, // numeric rounds half away from zero, as PostgreSQL
		{"3000000000", sql.TypeInt, sql.Null, sql.CodeNumericOutOfRange},
		{"abc", sql.TypeBigInt, sql.Null, sql.CodeInvalidText},
		{"1.5", sql.TypeDouble, sql.Double(1.5), ""},
		{"NaN", sql.TypeDouble, sql.Double(0), ""},
		{"12.345", dec, sql.Decimal(1235, 2), ""},
		{"true", sql.TypeBool, sql.Bool(true), ""},
		{"f", sql.TypeBool, sql.Bool(false), ""},
		{"maybe", sql.TypeBool, sql.Null, sql.CodeInvalidText},
		{"2026-11-30 05:00:10.123456+00", sql.TypeTimestamp, sql.Timestamp(1796014810123), ""},
		{"2026-11-30 07:00:10+02", sql.TypeTimestamp, sql.Timestamp(1796014810000), ""},
		{"2026-11-30 10:30:10+05:30", sql.TypeTimestamp, sql.Timestamp(1796014810000), ""},
		{"2026-11-30 05:00:10", sql.TypeTimestamp, sql.Timestamp(1796014810000), ""},
		{"2026-11-30", sql.TypeTimestamp, sql.Timestamp(1795996800000), ""},
		{"1969-12-31 23:59:59.9995+00", sql.TypeTimestamp, sql.Timestamp(-1), ""},
		{"infinity", sql.TypeTimestamp, sql.Null, sql.CodeDatetimeOverflow},
		{"0044-03-15 00:00:00 BC", sql.TypeTimestamp, sql.Null, sql.CodeDatetimeOverflow},
		{"yesterday", sql.TypeTimestamp, sql.Null, sql.CodeInvalidDatetime},
		{`{"a": [1, 2]}`, sql.TypeJSON, sql.JSONValue(`{"a": [1, 2]}`), ""},
		{`{"a"`, sql.TypeJSON, sql.Null, sql.CodeInvalidJSON},
	} {
		v, err := decodePGText(c.in, c.t)
		if c.code != "" {
			if err == nil || err.Code != c.code {
				t.Errorf("%q as %s: %v %v, want error %s", c.in, c.t, v, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q as %s: %v", c.in, c.t, err)
			continue
		}
		if c.in == "NaN" {
			if v.K != sql.KindDouble || v.F() == v.F() {
				t.Errorf("NaN: %v", v)
			}
			continue
		}
		if v.K != c.want.K || sql.Compare(v, c.want) != 0 {
			t.Errorf("%q as %s: %#v, want %#v", c.in, c.t, v, c.want)
		}
	}
}

// FuzzDecodePGText: any text decodes to a value of the asked type, or to an error with a
// SQLSTATE, never a panic.
func FuzzDecodePGText(f *testing.F) {
	for _, s := range []string{"42", "-1.5e3", "2026-11-30 05:00:10.5+05:30", "2026-11-30", "t", "NaN", `{"a":1}`, "infinity", "9999999999999999999999"} {
		for k := sql.KindBool; k <= sql.KindJSON; k++ {
			f.Add(s, uint8(k))
		}
	}
	f.Fuzz(func(t *testing.T, s string, k uint8) {
		typ := sql.Type{Kind: sql.Kind(k%8 + 1)}
		if typ.Kind == sql.KindDecimal {
			typ.Precision, typ.Scale = 12, 3
		}
		v, err := decodePGText(s, typ)
		if err != nil {
			if len(err.Code) != 5 || err.Message == "" {
				t.Fatalf("%q as %s: error without a code or message: %+v", s, typ, err)
			}
			return
		}
		if v.K != typ.Kind {
			t.Fatalf("%q as %s: a value of kind %s", s, typ, v.K)
		}
	})
}

// startPG starts a private PostgreSQL server for one test.
func startPG(t *testing.T) (*pgtest.Cluster, *pgx.Conn) {
	t.Helper()
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	conn, err := pgx.Connect(context.Background(), c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return c, conn
}

func pgExec(t *testing.T, conn *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// sortedRows renders rows as text lines, sorted.
func sortedRows(rows []sql.Row) []string {
	var out []string
	for _, r := range rows {
		var parts []string
		for _, v := range r {
			if v.IsError() {
				code, msg, _ := v.Err()
				parts = append(parts, "ERROR "+code+" "+msg)
				continue
			}
			if v.IsNull() {
				parts = append(parts, "NULL")
				continue
			}
			parts = append(parts, sql.Text(v))
		}
		out = append(out, strings.Join(parts, "|"))
	}
	sort.Strings(out)
	return out
}

func TestPostgresLookup(t *testing.T) {
	pg, conn := startPG(t)
	pgExec(t, conn,
		`CREATE SCHEMA crm`,
		`CREATE TABLE crm.users (user_id text PRIMARY KEY, tier varchar(10), credit numeric(10,2), since timestamptz,
		  vip boolean, visits int4, attrs jsonb, "Region" text, big numeric)`,
		`INSERT INTO crm.users VALUES
		  ('u1', 'gold', 12.5, '2026-11-30 05:00:00+00', true, 7, '{"a": 1}', 'eu', 1),
		  ('u2', 'silver', NULL, '2026-11-30 06:00:00.25+01', false, NULL, NULL, 'us', 1e12),
		  ('u''3', NULL, 0, NULL, NULL, 0, '[]', NULL, 2)`,
		`CREATE TABLE prices (shop int4, sku text, price float8, uid uuid, PRIMARY KEY (shop, sku))`,
		`INSERT INTO prices VALUES (1, 'a', 1.5, '6f1d3c1e-0c59-4bd0-9a63-5a3c6f0e1a11'), (1, 'b', 2.5, NULL), (2, 'a', 3.5, NULL)`,
		`CREATE TABLE "Plain" (id bigint PRIMARY KEY, name text)`,
		`INSERT INTO "Plain" VALUES (1, 'one'), (2, 'two')`,
		`CREATE TABLE ids (id uuid PRIMARY KEY, name text)`,
		`INSERT INTO ids VALUES ('6f1d3c1e-0c59-4bd0-9a63-5a3c6f0e1a11', 'x')`,
	)
	ctx := context.Background()
	open := func(t *testing.T, name string, opts map[string]string, cols sql.Schema, key ...int) *PostgresLookup {
		t.Helper()
		o := map[string]string{"connector": "postgres", "url": pg.URL}
		for k, v := range opts {
			o[k] = v
		}
		po, err := ParseLookup("postgres", name, o)
		if err != nil {
			t.Fatal(err)
		}
		l, err := OpenPostgresLookup(LookupSpec{Table: name, Options: po, Columns: cols, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	users := sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar},
		{Name: "credit", Type: sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}}, {Name: "since", Type: sql.TypeTimestamp},
		{Name: "vip", Type: sql.TypeBool}, {Name: "visits", Type: sql.TypeBigInt}, {Name: "attrs", Type: sql.TypeJSON},
		{Name: "region", Type: sql.TypeVarchar}}

	t.Run("one key column", func(t *testing.T) {
		l := open(t, "dim_users", map[string]string{"table": "crm.users"}, users, 0)
		rows, err := l.Lookup(ctx, []sql.Row{{sql.Varchar("u1")}, {sql.Varchar("u2")}, {sql.Varchar("u'3")}, {sql.Varchar("nobody")}})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(sortedRows(rows), "\n")
		want := strings.Join([]string{
			`u'3|NULL|0.00|NULL|NULL|0|[]|NULL`,
			`u1|gold|12.50|2026-11-30 05:00:00|t|7|{"a": 1}|eu`,
			`u2|silver|NULL|2026-11-30 05:00:00.25|f|NULL|NULL|us`,
		}, "\n")
		if got != want {
			t.Errorf("rows:\n%s\nwant:\n%s", got, want)
		}
		if rows, err := l.Lookup(ctx, []sql.Row{{sql.Varchar("x")}}); err != nil || len(rows) != 0 {
			t.Errorf("absent key: %v %v", rows, err)
		}
	})
	t.Run("composite key", func(t *testing.T) {
		cols := sql.Schema{{Name: "sku", Type: sql.TypeVarchar}, {Name: "shop", Type: sql.TypeBigInt}, {Name: "price", Type: sql.TypeDouble}}
		l := open(t, "prices", nil, cols, 1, 0)
		rows, err := l.Lookup(ctx, []sql.Row{{sql.BigInt(1), sql.Varchar("b")}, {sql.BigInt(2), sql.Varchar("a")}, {sql.BigInt(2), sql.Varchar("b")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(sortedRows(rows), ","); got != "a|2|3.5,b|1|2.5" {
			t.Errorf("rows %s", got)
		}
	})
	t.Run("quoted table name", func(t *testing.T) {
		l := open(t, "p", map[string]string{"table": `public."Plain"`}, sql.Schema{{Name: "ID", Type: sql.TypeBigInt}, {Name: "name", Type: sql.TypeVarchar}}, 0)
		rows, err := l.Lookup(ctx, []sql.Row{{sql.BigInt(2)}})
		if err != nil || strings.Join(sortedRows(rows), ",") != "2|two" {
			t.Errorf("rows %v, %v", sortedRows(rows), err)
		}
	})
	t.Run("values that do not convert", func(t *testing.T) {
		cols := sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "big", Type: sql.TypeInt}}
		l := open(t, "dim_users", map[string]string{"table": "crm.users"}, cols, 0)
		rows, err := l.Lookup(ctx, []sql.Row{{sql.Varchar("u1")}, {sql.Varchar("u2")}})
		if err != nil {
			t.Fatal(err)
		}
		got := sortedRows(rows)
		if len(got) != 2 || got[0] != "u1|1" || !strings.Contains(got[1], "ERROR 22003 lookup table dim_users: column big (crm.users.big): \"1000000000000\" does not convert to INT") {
			t.Errorf("rows %q", got)
		}
	})
	t.Run("keys the column type refuses", func(t *testing.T) {
		l := open(t, "ids", nil, sql.Schema{{Name: "id", Type: sql.TypeVarchar}, {Name: "name", Type: sql.TypeVarchar}}, 0)
		rows, err := l.Lookup(ctx, []sql.Row{{sql.Varchar("not-a-uuid")}, {sql.Varchar("6f1d3c1e-0c59-4bd0-9a63-5a3c6f0e1a11")}})
		if err != nil || strings.Join(sortedRows(rows), ",") != "6f1d3c1e-0c59-4bd0-9a63-5a3c6f0e1a11|x" {
			t.Errorf("rows %v, %v", sortedRows(rows), err)
		}
	})
	for _, c := range []struct {
		name  string
		table string
		cols  sql.Schema
		want  string
	}{
		{"missing table", "crm.nope", users[:1], `PostgreSQL has no table crm.nope`},
		{"missing schema", "nope.users", users[:1], `PostgreSQL has no table nope.users`},
		{"missing column", "crm.users", sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "colour", Type: sql.TypeVarchar}}, "has no column colour (its columns: user_id, tier, credit"},
		{"type mismatch", "crm.users", sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeBigInt}}, "column tier is declared BIGINT but is character varying(10) in PostgreSQL table crm.users"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := open(t, "d", map[string]string{"table": c.table}, c.cols, 0)
			_, err := l.Lookup(ctx, []sql.Row{{sql.Varchar("u1")}})
			var le *LookupError
			if !errors.As(err, &le) || le.Retry || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a lookup error (not retried) containing %q", err, c.want)
			}
		})
	}
}

// TestPostgresLookupRestart: while the database is down, lookups fail with an error worth
// retrying; once it is back, the same table answers again (the pool reconnects).
func TestPostgresLookupRestart(t *testing.T) {
	pg, conn := startPG(t)
	pgExec(t, conn, `CREATE TABLE users (user_id text PRIMARY KEY, tier text)`, `INSERT INTO users VALUES ('u1', 'gold')`)
	conn.Close(context.Background())
	o, err := ParsePostgresOptions("users", map[string]string{"url": pg.URL, "lookup_timeout": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenPostgresLookup(LookupSpec{Table: "users", Options: o,
		Columns: sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar}}, Key: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	key := []sql.Row{{sql.Varchar("u1")}}
	if rows, err := l.Lookup(ctx, key); err != nil || len(rows) != 1 {
		t.Fatalf("before the restart: %v %v", rows, err)
	}
	pg.StopServer()
	for i := 0; i < 2; i++ { // the pooled connection breaks, then connecting is refused
		_, err := l.Lookup(ctx, key)
		if err == nil || !Retryable(err) {
			t.Fatalf("lookup %d while the database is down: %v, want an error worth retrying", i, err)
		}
	}
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	if rows, err := l.Lookup(ctx, key); err != nil || len(rows) != 1 || rows[0][1].S != "gold" {
		t.Fatalf("after the restart: %v %v", rows, err)
	}
}
