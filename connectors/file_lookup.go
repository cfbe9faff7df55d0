package connectors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"rsql/connectors/options"
	"rsql/sql"
)

// The file connector as a lookup table (docs/sql.md, "Lookup joins"): a table declared
// with CREATE TABLE ... PRIMARY KEY ... WITH (connector = 'file', path = '...') and joined
// in processing time is read whole into memory when the job opens the join, and looked up
// there by key. It is a bounded side input: a file larger than MaxLookupFileBytes is
// refused. The file is read with the file source's line reader and decoded with the
// stream formats (json, csv), so its lines follow the same rules as a file stream's.

// MaxLookupFileBytes is the largest file a file lookup table reads (docs/sql.md).
const MaxLookupFileBytes = 64 << 20

// LookupFileError is a file lookup table's file that cannot be read: missing, too large, a
// line that does not decode or has a NULL key. It names the file and the line (Line 0:
// the file as a whole); the join that opens the table adds the table's name.
type LookupFileError struct {
	Path   string
	Line   int64
	Reason string
}

func (e *LookupFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("file %s: line %d: %s", e.Path, e.Line, e.Reason)
	}
	return fmt.Sprintf("file %s: %s", e.Path, e.Reason)
}

// ParseFileLookupOptions parses the options of a file table looked up by key
// (options.ParseFileLookup). Errors are *OptionError.
func ParseFileLookupOptions(raw map[string]string) (LookupOptions, error) {
	return options.ParseFileLookup(raw)
}

// FileLookup is a LookupTable over a file held in memory: each key's row, the line of the
// key with the greatest version time when the table declares one (LookupSpec.VersionTime;
// NULL the greatest; among equal times, and without one, the last line). A JSON line whose __op field is "delete" (or "d", any
// case) removes its key, as in a table's changelog. Lookups never fail.
type FileLookup struct {
	spec LookupSpec
	rows map[string][]sql.Row // one row per key, by sql.AppendKey of the key columns
}

// OpenFileLookup reads the file of spec whole (within the sandbox files; nil: paths as
// given). spec.Schema is the table's declared columns, the file's fields in that order
// for csv; spec.Columns, a subset of them, are what lookups return. A missing file, a
// file over MaxLookupFileBytes, a line that does not decode or whose key is NULL is a
// *LookupFileError.
func OpenFileLookup(files *FileRoots, spec LookupSpec) (*FileLookup, error) {
	o := spec.Options
	if o.Path == "" {
		return nil, &OptionError{Reason: "the file connector needs a path option"}
	}
	if len(spec.Key) == 0 {
		return nil, fmt.Errorf("lookup table %s: no key columns", spec.Table)
	}
	fail := func(line int64, format string, args ...any) error {
		return &LookupFileError{Path: o.Path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	declared := spec.Schema
	if len(declared) == 0 {
		declared = spec.Columns
	}
	// Where each returned column is in the declared row.
	proj := make([]int, len(spec.Columns))
	for i, c := range spec.Columns {
		if proj[i] = declared.Index(c.Name); proj[i] < 0 {
			return nil, fmt.Errorf("lookup table %s: column %s is not declared", spec.Table, c.Name)
		}
	}
	decodeSchema := declared
	op := -1
	if o.Format == "json" && declared.Index(sql.ChangeColumn) < 0 {
		decodeSchema = append(append(sql.Schema{}, declared...), sql.Column{Name: sql.ChangeColumn, Type: sql.TypeVarchar})
		op = len(declared)
	}
	format, err := NewFormat(o.Format, decodeSchema)
	if err != nil {
		return nil, fmt.Errorf("lookup table %s: %w", spec.Table, err)
	}

	t, err := files.resolve(o.Path)
	if err != nil {
		return nil, fmt.Errorf("lookup table %s: %w", spec.Table, err)
	}
	st, err := t.stat()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail(0, "no such file")
	case err != nil:
		return nil, fail(0, "%v", files.escapeErr(o.Path, err))
	case st.IsDir():
		return nil, fail(0, "is a directory")
	case st.Size() > MaxLookupFileBytes:
		return nil, fail(0, "%d bytes, more than the %d a lookup table reads into memory (a bounded side input)", st.Size(), MaxLookupFileBytes)
	}
	src := &FileSource{path: o.Path, target: t, open: map[*fileReader]struct{}{}}
	defer src.Close()
	rd, err := src.Open(context.Background(), fileSplit, 0)
	if err != nil {
		return nil, fail(0, "%v", err)
	}
	l := &FileLookup{spec: spec, rows: map[string][]sql.Row{}}
	vt := -1
	if spec.Versioned && spec.Schema != nil && spec.VersionTime >= 0 && spec.VersionTime < len(declared) {
		vt = spec.VersionTime
	}
	// The version time of each key's line in effect (its row, or its delete).
	times := map[string]sql.Value{}
	var (
		msgs  []Message
		row   sql.Row
		key   []byte
		total int64
	)
	for {
		msgs, err = rd.Read(context.Background(), msgs[:0], 512)
		if errors.Is(err, ErrEndOfSplit) {
			break
		}
		if err != nil {
			return nil, err // names the file and the line
		}
		for _, m := range msgs {
			// The file may have grown since it was measured.
			if total += int64(len(m.Body)) + 1; total > MaxLookupFileBytes {
				return nil, fail(0, "more than the %d bytes a lookup table reads into memory (a bounded side input)", MaxLookupFileBytes)
			}
			row, err = format.Decode(m.Body, row[:0])
			if err != nil {
				return nil, fail(m.Offset, "%v", err)
			}
			key = key[:0]
			for _, k := range spec.Key {
				v := row[proj[k]]
				if v.IsNull() {
					return nil, fail(m.Offset, "the primary key column %s is NULL", spec.Columns[k].Name)
				}
				key = sql.AppendKey(key, v)
			}
			if vt >= 0 {
				t := row[vt]
				if prev, ok := times[string(key)]; ok && olderVersion(t, prev) {
					continue // older than the key's version in effect: not its latest
				}
				times[string(key)] = t
			}
			if op >= 0 && sql.IsDelete(row[op]) {
				delete(l.rows, string(key))
				continue
			}
			out := make(sql.Row, len(proj))
			for i, p := range proj {
				out[i] = row[p] // decoded strings are fresh: the row may keep them
			}
			l.rows[string(key)] = []sql.Row{out} // the key's latest line wins
		}
	}
	return l, nil
}

// olderVersion reports whether version time t is older than prev. A NULL time is the
// newest, as in the latest versions of a table in a join or a pull query (docs/sql.md,
// "Tables"): a timed line after a NULL-timed one of its key is older than it.
func olderVersion(t, prev sql.Value) bool {
	switch {
	case prev.IsNull():
		return !t.IsNull()
	case t.IsNull():
		return false
	}
	return sql.Compare(t, prev) < 0
}

// Len is the number of keys the table holds.
func (l *FileLookup) Len() int { return len(l.rows) }

// Lookup implements LookupTable: the rows of keys, from memory.
func (l *FileLookup) Lookup(_ context.Context, keys []sql.Row) ([]sql.Row, error) {
	var out []sql.Row
	var buf []byte
	for _, k := range keys {
		buf = buf[:0]
		for _, v := range k {
			buf = sql.AppendKey(buf, v)
		}
		out = append(out, l.rows[string(buf)]...)
	}
	return out, nil
}

// Get implements MemoryLookup.
func (l *FileLookup) Get(key []byte) []sql.Row { return l.rows[string(key)] }

// Close drops nothing: the rows go with the table.
func (l *FileLookup) Close() error { return nil }
