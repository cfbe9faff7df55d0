package connectors

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"rsql/sql"
)

// pgoutput messages (protocol version 1), built as the server sends them.

func pgoStr(b []byte, s string) []byte { return append(append(b, s...), 0) }

func pgoBegin() []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, 0x100)
	b = binary.BigEndian.AppendUint64(b, 0)
	return binary.BigEndian.AppendUint32(b, 7)
}

func pgoCommit(end uint64) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, end-8)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, 0)
}

type pgoCol struct {
	name string
	oid  uint32
}

func pgoRelation(id uint32, ns, name string, ident byte, cols ...pgoCol) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, id)
	b = pgoStr(pgoStr(b, ns), name)
	b = append(b, ident)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, 0)
		b = pgoStr(b, c.name)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// pgoTuple encodes values: "\x00" is NULL, "\x01" an unchanged TOASTed value.
func pgoTuple(b []byte, vals ...string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		switch v {
		case "\x00":
			b = append(b, 'n')
		case "\x01":
			b = append(b, 'u')
		default:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

func pgoInsert(id uint32, vals ...string) []byte {
	return pgoTuple(append(binary.BigEndian.AppendUint32([]byte{'I'}, id), 'N'), vals...)
}

func pgoUpdate(id uint32, old, new []string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'U'}, id)
	if old != nil {
		b = pgoTuple(append(b, 'O'), old...)
	}
	return pgoTuple(append(b, 'N'), new...)
}

func pgoDelete(id uint32, old ...string) []byte {
	return pgoTuple(append(binary.BigEndian.AppendUint32([]byte{'D'}, id), 'O'), old...)
}

func pgoTruncate(ids ...uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'T'}, uint32(len(ids)))
	b = append(b, 0)
	for _, id := range ids {
		b = binary.BigEndian.AppendUint32(b, id)
	}
	return b
}

var cdcTestSchema = sql.Schema{
	{Name: "id", Type: sql.TypeBigInt}, {Name: "name", Type: sql.TypeVarchar},
	{Name: "amount", Type: sql.Type{Kind: sql.KindDecimal}}, {Name: "ok", Type: sql.TypeBool},
	{Name: "ts", Type: sql.TypeTimestamp}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar},
}

var cdcTestRelation = pgoRelation(16400, "public", "orders", 'f',
	pgoCol{"id", oidInt8}, pgoCol{"name", oidText}, pgoCol{"amount", oidNumeric}, pgoCol{"ok", oidBool}, pgoCol{"ts", oidTimestampTZ})

// rowText renders decoded rows for comparison.
func rowText(rows []sql.Row) string {
	var out []string
	for _, r := range rows {
		var f []string
		for _, v := range r {
			f = append(f, string(sql.AppendText(nil, v)))
		}
		out = append(out, strings.Join(f, "|"))
	}
	return strings.Join(out, "\n")
}

// TestCDCDecodeChanges: inserts, updates (with an unchanged TOASTed value, and of the key)
// and deletes of the table become a retract changelog, a TRUNCATE naming the table a row
// whose change column is "truncate" (on_truncate = 'delete'); other relations are skipped;
// a commit reports the transaction's end.
func TestCDCDecodeChanges(t *testing.T) {
	d := newCDCDecoder("public.orders", cdcTestSchema)
	d.truncates = true
	msgs := [][]byte{
		cdcTestRelation,
		pgoRelation(16500, "public", "other", 'd', pgoCol{"x", oidInt4}),
		pgoBegin(),
		pgoInsert(16400, "1", "ann", "12.50", "t", "2026-01-02 03:04:05.678+00"),
		pgoInsert(16500, "9"),
		pgoInsert(16400, "2", "\x00", "\x00", "\x00", "\x00"),
		pgoUpdate(16400, []string{"1", "ann", "12.50", "t", "2026-01-02 03:04:05.678+00"}, []string{"1", "\x01", "13", "f", "2026-01-02 03:04:05.678+00"}),
		pgoUpdate(16400, []string{"2", "\x00", "\x00", "\x00", "\x00"}, []string{"3", "bo", "\x00", "\x00", "\x00"}),
		pgoDelete(16400, "1", "ann", "13", "f", "2026-01-02 03:04:05.678+00"),
		pgoTruncate(16500),
		pgoTruncate(16500, 16400),
		pgoInsert(16400, "4", "di", "1", "t", "\x00"),
	}
	for _, m := range msgs {
		ev, err := d.decode(m, 5)
		if err != nil || ev.commit {
			t.Fatalf("decode %q: %v %v", m, ev, err)
		}
	}
	ev, err := d.decode(pgoCommit(0x2000), 6)
	if err != nil || !ev.commit || ev.end != 0x2000 {
		t.Fatalf("commit: %+v %v", ev, err)
	}
	want := strings.Join([]string{
		"1|ann|12.50|t|2026-01-02 03:04:05.678|",
		"2|||||",
		"1|ann|12.50|t|2026-01-02 03:04:05.678|delete",
		"1|ann|13|f|2026-01-02 03:04:05.678|",
		"2|||||delete",
		"3|bo||||",
		"1|ann|13|f|2026-01-02 03:04:05.678|delete",
		"|||||truncate",
		"4|di|1|t||",
	}, "\n")
	if got := rowText(d.rows); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
}

// TestCDCDecodeRefuses: what the decoder cannot follow stops the job with a message
// naming it.
func TestCDCDecodeRefuses(t *testing.T) {
	cases := []struct {
		name string
		msg  []byte
		says string
	}{
		{"column added", pgoRelation(16400, "public", "orders", 'f', pgoCol{"id", oidInt8}, pgoCol{"name", oidText},
			pgoCol{"amount", oidNumeric}, pgoCol{"ok", oidBool}, pgoCol{"ts", oidTimestampTZ}, pgoCol{"extra", oidText}), "column extra was added"},
		{"column dropped", pgoRelation(16400, "public", "orders", 'f', pgoCol{"id", oidInt8}, pgoCol{"name", oidText},
			pgoCol{"amount", oidNumeric}, pgoCol{"ts", oidTimestampTZ}), "column ok was dropped"},
		{"type changed", pgoRelation(16400, "public", "orders", 'f', pgoCol{"id", oidText}, pgoCol{"name", oidText},
			pgoCol{"amount", oidNumeric}, pgoCol{"ok", oidBool}, pgoCol{"ts", oidTimestampTZ}), "column id is now text"},
		{"identity", pgoRelation(16400, "public", "orders", 'd', pgoCol{"id", oidInt8}), "REPLICA IDENTITY FULL"},
		{"truncate", pgoTruncate(16400), "on_truncate is 'error'"},
		{"update without old row", pgoUpdate(16400, nil, []string{"1", "a", "1", "t", "\x00"}), "REPLICA IDENTITY FULL"},
		{"bad value", pgoInsert(16400, "x", "a", "1", "t", "\x00"), "column id"},
		{"width", pgoInsert(16400, "1"), "has 1 columns"},
		{"renamed", pgoRelation(16400, "public", "orders_old", 'f', pgoCol{"id", oidInt8}), "renamed to public.orders_old"},
		{"truncated message", pgoInsert(16400, "1", "a", "1", "t", "2026-01-01")[:20], "malformed"},
	}
	for _, c := range cases {
		d := newCDCDecoder("public.orders", cdcTestSchema)
		d.oid = 16400
		if _, err := d.decode(cdcTestRelation, 1); err != nil {
			t.Fatal(err)
		}
		d.decode(pgoBegin(), 2)
		_, err := d.decode(c.msg, 3)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
		}
	}
}

// FuzzCDCDecode: any message after the table's relation message decodes or fails with an
// error; rows that come out have the schema's width and a change column that is NULL,
// "delete" or, with on_truncate = 'delete', "truncate" (a row of NULLs otherwise). The
// corpus is testdata/fuzz/FuzzCDCDecode.
func FuzzCDCDecode(f *testing.F) {
	f.Add(pgoBegin())
	f.Add(pgoInsert(16400, "1", "ann", "12.50", "t", "2026-01-02 03:04:05.678+00"))
	f.Add(pgoUpdate(16400, []string{"1", "a", "1", "t", "\x00"}, []string{"2", "\x01", "1", "f", "\x00"}))
	f.Add(pgoDelete(16400, "1", "a", "1", "t", "\x00"))
	f.Add(pgoTruncate(16400))
	f.Add(pgoCommit(0x300))
	f.Add(cdcTestRelation)
	f.Fuzz(func(t *testing.T, msg []byte) {
		d := newCDCDecoder("public.orders", cdcTestSchema)
		d.truncates = len(msg)%2 == 0
		if _, err := d.decode(cdcTestRelation, 1); err != nil {
			t.Fatal(err)
		}
		d.decode(pgoBegin(), 2)
		if _, err := d.decode(msg, pglogrepl.LSN(3)); err != nil {
			return
		}
		for _, r := range d.rows {
			if len(r) != len(cdcTestSchema) {
				t.Fatalf("row of %d values", len(r))
			}
			op := r[len(r)-1]
			if sql.IsTruncate(op) {
				if !d.truncates {
					t.Fatal("a truncation with on_truncate = 'error'")
				}
				for _, v := range r[:len(r)-1] {
					if !v.IsNull() {
						t.Fatalf("truncation row %v", r)
					}
				}
				continue
			}
			if op.K != sql.KindNull && !sql.IsDelete(op) {
				t.Fatalf("change column %v", op)
			}
		}
	})
}

// TestParsePostgresCDCOptions: defaults (public schema, rsql_<table> slot and publication)
// and the options' checks.
func TestParsePostgresCDCOptions(t *testing.T) {
	o, err := ParsePostgresCDCOptions("Orders", map[string]string{"url": "postgres://u@h/db"})
	if err != nil || o.Target != "public.orders" || o.Slot != "rsql_orders" || o.Publication != "rsql_orders" || o.CreateSlot || !o.TruncateDeletes {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParsePostgresCDCOptions("x", map[string]string{"url": "postgres://u@h/db", "table": `shop."Big"`, "slot": "s1", "create_slot": "true", "on_truncate": "Error"})
	if err != nil || o.Target != "shop.Big" || o.Slot != "s1" || !o.CreateSlot || o.TruncateDeletes {
		t.Fatalf("%+v %v", o, err)
	}
	for says, raw := range map[string]map[string]string{
		"needs a url":      {},
		"slot":             {"url": "postgres://u@h/db", "slot": "Bad-Name"},
		"create_slot":      {"url": "postgres://u@h/db", "create_slot": "maybe"},
		"on_truncate":      {"url": "postgres://u@h/db", "on_truncate": "ignore"},
		"leave format out": {"url": "postgres://u@h/db", "format": "csv"},
	} {
		if _, err := ParsePostgresCDCOptions("t", raw); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%v: %v, want an error saying %q", raw, err, says)
		}
	}
}
