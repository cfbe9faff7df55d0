package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
)

// The file sandbox: paths outside the roots, and symbolic links out of them, fail with
// 42501 naming the roots; relative paths start at the first root; what is inside works.
func TestFileSandbox(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeLines(t, filepath.Join(outside, "secret.jsonl"), `{"line": "secret"}`)
	writeLines(t, filepath.Join(root, "in.jsonl"), `{"line": "one"}`, `{"line": "two"}`)
	// Links: one to a file outside, one to a directory outside, one that stays inside.
	must(t, os.Symlink(filepath.Join(outside, "secret.jsonl"), filepath.Join(root, "leak.jsonl")))
	must(t, os.Symlink(outside, filepath.Join(root, "out")))
	must(t, os.Symlink(filepath.Join(root, "in.jsonl"), filepath.Join(root, "alias.jsonl")))

	e, err := Open(Config{DataDir: filepath.Join(dir, "data"), StateBackend: "memory", Log: io.Discard, FileRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	te := &testEngine{t: t, dir: dir, sess: NewSession(), e: e}

	te.wantCode("CREATE STREAM pw (line VARCHAR) WITH (connector = 'file', path = '/etc/passwd', format = 'csv')", "42501", "/etc/passwd", root)
	te.wantCode("CREATE STREAM s1 (line VARCHAR) WITH (path = '../outside/secret.jsonl')", "42501", root)
	te.wantCode("CREATE STREAM s2 (line VARCHAR) WITH (path = 'leak.jsonl')", "42501", "symbolic link", root)
	te.wantCode("CREATE STREAM s3 (line VARCHAR) WITH (path = 'in.jsonl', dlq_path = '/tmp/dlq.jsonl')", "42501", "/tmp/dlq.jsonl")
	te.mustExec("CREATE STREAM src (line VARCHAR) WITH (path = 'in.jsonl')")
	te.wantCode("CREATE STREAM o1 WITH (path = '"+filepath.Join(outside, "o1.jsonl")+"') AS SELECT line FROM src", "42501", root)
	te.wantCode("CREATE STREAM o2 WITH (path = 'out/o2.jsonl') AS SELECT line FROM src", "42501", "symbolic link")

	// Inside: a relative path under the root, through a link that stays inside.
	te.mustExec("CREATE STREAM alias (line VARCHAR) WITH (path = 'alias.jsonl')")
	te.mustExec("CREATE STREAM copy WITH (path = 'sub/copy.jsonl') AS SELECT line FROM alias")
	te.waitJobs()
	got, err := os.ReadFile(filepath.Join(root, "sub", "copy.jsonl"))
	if err != nil || strings.Count(string(got), "\n") != 2 {
		t.Fatalf("copy inside the root: %q, %v (jobs %v)", got, err, te.jobStates())
	}
	for _, name := range []string{"o1.jsonl", "o2.jsonl"} {
		if _, err := os.Stat(filepath.Join(outside, name)); err == nil {
			t.Errorf("%s was written outside the root", name)
		}
	}

	// A link swapped in after CREATE is refused when the job opens the file.
	writeLines(t, filepath.Join(root, "later.jsonl"), `{"line": "x"}`)
	te.mustExec("CREATE STREAM later (line VARCHAR) WITH (path = 'later.jsonl')")
	must(t, os.Remove(filepath.Join(root, "later.jsonl")))
	must(t, os.Symlink(filepath.Join(outside, "secret.jsonl"), filepath.Join(root, "later.jsonl")))
	_, _, err = te.exec("CREATE STREAM leaked WITH (path = 'leaked.jsonl') AS SELECT line FROM later")
	if err == nil || !strings.Contains(err.Error(), "outside the allowed file roots") || !strings.Contains(err.Error(), root) {
		t.Fatalf("a job reading a link swapped in after CREATE: %v", err)
	}
	te.waitJobs()
	if data, _ := os.ReadFile(filepath.Join(root, "leaked.jsonl")); strings.Contains(string(data), "secret") {
		t.Fatal("a link swapped in after CREATE read a file outside the root")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A pull query whose result passes MaxResultBytes fails with 54000; a narrower one works.
func TestPullQueryResultLimit(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf(`{"k": %d, "s": "%s"}`, i, strings.Repeat("x", 100)))
	}
	writeLines(t, filepath.Join(dir, "rows.jsonl"), lines...)
	e, err := Open(Config{DataDir: filepath.Join(dir, "data"), StateBackend: "memory", Log: io.Discard, FileRoots: []string{dir}, MaxResultBytes: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	te := &testEngine{t: t, dir: dir, sess: NewSession(), e: e}
	te.mustExec("CREATE STREAM r (k BIGINT, s VARCHAR) WITH (path = 'rows.jsonl')")
	te.mustExec("CREATE MATERIALIZED VIEW v AS SELECT k, MAX(s) AS s FROM r GROUP BY k")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, rows, err := te.exec("SELECT k FROM v")
		if err == nil && len(rows[0]) == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view did not fill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	te.wantCode("SELECT k, s FROM v", sql.CodeProgramLimit, "20000 bytes")
	if _, rows := te.mustExec("SELECT k, s FROM v LIMIT 5"); len(rows[0]) != 5 {
		t.Fatalf("LIMIT 5: %d rows", len(rows[0]))
	}
}

// The engine applies its statement limits, and a deep expression fails the statement only.
func TestEngineStatementLimits(t *testing.T) {
	te := newTestEngine(t, false)
	te.wantCode("SELECT 1"+strings.Repeat("+1", 1_000_000), sql.CodeTooComplex, "more than 200000 tokens")
	te.wantCode("SELECT 1"+strings.Repeat("+1", 5000), sql.CodeTooComplex, "nest more than 1000")
	te.wantCode("INSERT INTO x VALUES "+strings.Repeat("(1),", 10_000)+"(1)", sql.CodeProgramLimit, "10001 VALUES rows")
	if _, rows := te.mustExec("SELECT 1" + strings.Repeat("+1", 900) + " AS n"); rows[0][0][0] != "901" {
		t.Fatalf("900 terms: %v", rows[0])
	}
}

// panicFormat panics on a record holding "boom".
type panicFormat struct{ connectors.Format }

func (f panicFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	if strings.Contains(string(body), "boom") {
		panic("decoder bug")
	}
	return f.Format.Decode(body, row)
}

// A decoder that panics on a record makes that record bad; the others go through.
func TestSafeFormatTurnsPanicsIntoBadRecords(t *testing.T) {
	inner, err := connectors.NewFormat("json", sql.Schema{{Name: "a", Type: sql.TypeBigInt}})
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	f := safeFormat{f: panicFormat{inner}, log: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
	row, err := f.Decode([]byte(`{"a": 7}`), nil)
	if err != nil || row[0].I != 7 {
		t.Fatalf("a good record: %v %v", row, err)
	}
	_, err = f.Decode([]byte(`{"a": "boom"}`), row)
	var de *connectors.DecodeError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, "decoder bug") {
		t.Fatalf("a record the decoder panics on: %v", err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "goroutine") {
		t.Fatalf("the panic was not logged with its stack: %q", logged)
	}
}

// A panic inside a running job (here in the row callback, which runs on a stage's
// goroutine) fails that job with exec.PanicError; the process and the engine go on.
func TestJobPanicFailsTheJobOnly(t *testing.T) {
	te := newTestEngine(t, false)
	writeLines(t, te.path("p.jsonl"), `{"a": 1}`, `{"a": 2}`)
	te.mustExec("CREATE STREAM p (a BIGINT) WITH (path = '" + te.path("p.jsonl") + "')")
	stmts, err := sql.Parse("SELECT a FROM p")
	if err != nil {
		t.Fatal(err)
	}
	q, err := te.e.bind(stmts[0].(*sql.Select))
	if err != nil {
		t.Fatal(err)
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	env := te.e.env("boom")
	env.Store = nil
	env.OnRow = func(sql.Row) error { panic("operator bug") }
	job, err := exec.Start(context.Background(), "boom", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the job whose stage panicked did not end")
	}
	var pe *exec.PanicError
	if !errors.As(err, &pe) || !strings.Contains(pe.Error(), "operator bug") || len(pe.Stack) == 0 {
		t.Fatalf("job error: %v", err)
	}
	if _, rows := te.mustExec("SELECT 40 + 2"); rows[0][0][0] != "42" {
		t.Fatalf("the engine after a job panicked: %v", rows)
	}
}

// Users persist in the catalog file (which only its owner may read) and survive a
// restart; the first admin is made once, with a generated password, or reset by an admin
// password.
func TestUsersPersistAndFirstAdmin(t *testing.T) {
	te := newTestEngine(t, false)
	cat := te.e.Catalog()
	gen, err := cat.EnsureAdmin("")
	if err != nil || len(gen) < 20 {
		t.Fatalf("first admin: %q, %v", gen, err)
	}
	if again, err := cat.EnsureAdmin(""); err != nil || again != "" {
		t.Fatalf("a second start made another admin password: %q %v", again, err)
	}
	te.mustExec("CREATE USER reader WITH PASSWORD 'r' READ ONLY")
	u, ok := cat.User(AdminUser)
	if !ok || u.Role != RoleAdmin {
		t.Fatalf("admin: %+v %v", u, ok)
	}
	te.e.Close()
	info, err := os.Stat(te.path("catalog.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("catalog file mode: %v %v", info.Mode(), err)
	}
	data, _ := os.ReadFile(te.path("catalog.json"))
	if strings.Contains(string(data), "'r'") || !strings.Contains(string(data), "SCRAM-SHA-256$4096:") {
		t.Fatalf("the catalog does not hold secrets only:\n%s", data)
	}
	te.open()
	cat = te.e.Catalog()
	if r, ok := cat.User("READER"); !ok || r.Role != RoleReadOnly || r.Secret == "" {
		t.Fatalf("reader after restart: %+v %v", r, ok)
	}
	old, _ := cat.User(AdminUser)
	if gen, err := cat.EnsureAdmin("given"); err != nil || gen != "" {
		t.Fatalf("EnsureAdmin(given): %q %v", gen, err)
	}
	if now, _ := cat.User(AdminUser); now.Secret == old.Secret {
		t.Fatal("the admin password was not reset")
	}
	_, rows := te.mustExec("SHOW USERS")
	if fmt.Sprint(rows[0]) != "[[reader read_only true] [rsql admin true]]" {
		t.Fatalf("SHOW USERS: %v", rows[0])
	}
}

// The authentication default: trust on a loopback listen address, passwords elsewhere or
// with an admin password; trust is refused on other addresses.
func TestChooseAuth(t *testing.T) {
	for _, c := range []struct {
		auth, addr, pw string
		want           AuthMethod
		err            string
	}{
		{"", "127.0.0.1:5433", "", AuthTrust, ""},
		{"", "localhost:5433", "", AuthTrust, ""},
		{"", "[::1]:5433", "", AuthTrust, ""},
		{"", "127.0.0.1:5433", "pw", AuthSCRAM, ""},
		{"", "0.0.0.0:5433", "", AuthSCRAM, ""},
		{"", ":5433", "", AuthSCRAM, ""},
		{"", "10.0.0.5:5433", "", AuthSCRAM, ""},
		{"trust", "0.0.0.0:5433", "", "", "loopback"},
		{"trust", "10.0.0.5:5433", "", "", "loopback"},
		{"trust", "127.0.0.1:5433", "pw", "", "admin-password"},
		{"scram-sha-256", "127.0.0.1:5433", "", AuthSCRAM, ""},
		{"md5", "127.0.0.1:5433", "", "", "unknown"},
	} {
		got, err := chooseAuth(SystemConfig{Auth: c.auth, PgAddr: c.addr, AdminPassword: c.pw})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want an error about %s", c, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %s %v, want %s", c, got, err, c.want)
		}
	}
}

// What the panic guard costs a record's decoding:
//
//	go test ./server -run '^$' -bench SafeFormatDecode -benchmem
func BenchmarkSafeFormatDecode(b *testing.B) {
	schema := sql.Schema{{Name: "id", Type: sql.TypeBigInt}, {Name: "user", Type: sql.TypeVarchar}, {Name: "amount", Type: sql.TypeDouble},
		{Name: "ts", Type: sql.TypeTimestamp}}
	inner, err := connectors.NewFormat("json", schema)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id": 12345, "user": "u42", "amount": 9.5, "ts": "2026-11-30T05:00:01Z"}`)
	for _, c := range []struct {
		name string
		f    connectors.Format
	}{{"raw", inner}, {"guarded", safeFormat{f: inner, log: func(string, ...any) {}}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			row := make(sql.Row, 0, len(schema))
			for i := 0; i < b.N; i++ {
				var err error
				if row, err = c.f.Decode(body, row[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
