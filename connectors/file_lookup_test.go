package connectors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rsql/sql"
)

// A file lookup table holds each key's last line, returns the columns asked for (any
// subset of the declared ones, in any order) and answers a batch of keys with the rows of
// those it has; keys of several columns are matched whole.
func TestFileLookupRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.csv")
	if err := os.WriteFile(path, []byte("a,1,1.5,x\r\nb,1,2.5,y\n\na,2,3.5,z\na,1,4.5,w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	declared := sql.Schema{{Name: "cat", Type: sql.TypeVarchar}, {Name: "qty", Type: sql.TypeInt},
		{Name: "price", Type: sql.TypeDouble}, {Name: "note", Type: sql.TypeVarchar}}
	o, err := ParseLookup("file", "prices", map[string]string{"connector": "file", "path": path, "format": "csv"})
	if err != nil || o.Target != path || o.CacheTTL != 0 || o.Path != path || o.Format != "csv" {
		t.Fatalf("lookup options %+v, %v: want the path as target and no cache", o, err)
	}
	spec := LookupSpec{Table: "prices", Options: o,
		Columns: sql.Schema{declared[2], declared[1], declared[0]}, Key: []int{2, 1}, Schema: declared}
	k, _ := Lookup("file")
	tab, err := k.OpenLookup(context.Background(), Deps{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if n := tab.(*FileLookup).Len(); n != 3 {
		t.Fatalf("%d keys, want 3 (a/1 twice)", n)
	}
	rows, err := tab.Lookup(context.Background(), []sql.Row{
		{sql.Varchar("a"), sql.Int(1)}, {sql.Varchar("c"), sql.Int(1)}, {sql.Varchar("b"), sql.Int(1)}, {sql.Varchar("b"), sql.Int(2)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r[0].String()+" "+r[1].String()+" "+r[2].String())
	}
	if g := strings.Join(got, "; "); g != "4.5 1 a; 2.5 1 b" {
		t.Fatalf("rows %q, want the last line of a/1 and b/1's line", g)
	}
}

// What cannot be read is an error naming the file (and the line); a path outside the file
// roots is refused as for any file.
func TestFileLookupErrors(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	schema := sql.Schema{{Name: "k", Type: sql.TypeBigInt}, {Name: "v", Type: sql.TypeVarchar}}
	open := func(files *FileRoots, path, format string) error {
		o, err := ParseFileLookupOptions(map[string]string{"path": path, "format": format})
		if err != nil {
			t.Fatal(err)
		}
		_, err = OpenFileLookup(files, LookupSpec{Table: "t", Options: o,
			Columns: schema, Key: []int{0}, Schema: schema})
		return err
	}
	for _, c := range []struct {
		path, format string
		want         []string
	}{
		{write("bad.csv", "1,a\n2,b,c\n"), "csv", []string{"bad.csv: line 2: csv: more than 2 fields"}},
		{write("bad.jsonl", "{\"k\": 1}\n\n{\"k\": 2, \"v\": 3\n"), "json", []string{"bad.jsonl: line 3:"}},
		{write("nokey.jsonl", "{\"v\": \"x\"}\n"), "json", []string{"nokey.jsonl: line 1: the primary key column k is NULL"}},
		{filepath.Join(root, "missing.csv"), "csv", []string{"missing.csv: no such file"}},
		{root, "csv", []string{"root: is a directory"}},
	} {
		err := open(nil, c.path, c.format)
		var fe *LookupFileError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v, want a *LookupFileError", c.path, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.path, err, w)
			}
		}
	}
	outside := filepath.Join(dir, "outside.csv")
	if err := os.WriteFile(outside, []byte("1,a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := OpenFileRoots(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	if err := open(roots, outside, "csv"); !errors.Is(err, ErrOutsideFileRoots) {
		t.Errorf("a file outside the roots: %v", err)
	}
	if err := open(roots, "ok.csv", "csv"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a relative path under the root that does not exist: %v", err)
	}
	write("ok.csv", "7,seven\n")
	if err := open(roots, "ok.csv", "csv"); err != nil {
		t.Errorf("a relative path under the root: %v", err)
	}
}

// A table with a version time holds each key's line with the greatest version time: a
// line older than the key's line in effect (a row or a delete) changes nothing; among equal
// times the last line wins.
func TestFileLookupVersionTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiers.jsonl")
	lines := []string{
		`{"k":"a","tier":"gold","ts":"2026-01-01T00:00:10Z"}`,
		`{"k":"a","tier":"stale","ts":"2026-01-01T00:00:05Z"}`,
		`{"k":"b","tier":"x","ts":"2026-01-01T00:00:01Z"}`,
		`{"k":"b","__op":"delete","ts":"2026-01-01T00:00:20Z"}`,
		`{"k":"b","tier":"older than its delete","ts":"2026-01-01T00:00:15Z"}`,
		`{"k":"c","tier":"first","ts":"2026-01-01T00:00:30Z"}`,
		`{"k":"c","tier":"same time, later","ts":"2026-01-01T00:00:30Z"}`,
		// A NULL version time is the newest: a timed line after it is older, a NULL-timed
		// line after a timed one newer.
		`{"k":"d","tier":"untimed","ts":null}`,
		`{"k":"d","tier":"timed after an untimed","ts":"2026-01-01T00:00:40Z"}`,
		`{"k":"e","tier":"timed","ts":"2026-01-01T00:00:50Z"}`,
		`{"k":"e","tier":"untimed after a timed","ts":null}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	declared := sql.Schema{{Name: "k", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar}, {Name: "ts", Type: sql.TypeTimestamp}}
	o, err := ParseLookup("file", "tiers", map[string]string{"connector": "file", "path": path, "format": "json"})
	if err != nil {
		t.Fatal(err)
	}
	for _, versioned := range []bool{true, false} {
		spec := LookupSpec{Table: "tiers", Options: o, Columns: declared[:2], Key: []int{0}, Schema: declared,
			Versioned: versioned, VersionTime: 2}
		tab, err := OpenFileLookup(nil, spec)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			for _, r := range tab.Get(sql.AppendKey(nil, sql.Varchar(k))) {
				got = append(got, k+"="+r[1].S)
			}
		}
		want := "a=gold; c=same time, later; d=untimed; e=untimed after a timed"
		if !versioned {
			// the last line of each key
			want = "a=stale; b=older than its delete; c=same time, later; d=timed after an untimed; e=untimed after a timed"
		}
		if g := strings.Join(got, "; "); g != want {
			t.Errorf("versioned=%v: %q, want %q", versioned, g, want)
		}
	}
}
