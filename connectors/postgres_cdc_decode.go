package connectors

// The pgoutput decoder of the postgres-cdc connector (postgres_cdc.go): it turns the
// logical replication messages of one table into rsql rows of a retract changelog
// (docs/sql.md, "PostgreSQL change data capture"). It is a pure function of the messages,
// so it is fuzzed on its own (postgres_cdc_fuzz_test.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"rsql/sql"
)

// PostgreSQL type oids of the types the connector reads (pg_type.oid; stable across
// releases).
const (
	oidBool        = 16
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
	oidNumeric     = 1700
	oidJSONB       = 3802
)

// cdcTypeFits reports whether values of the PostgreSQL type typname (pg_type.typname)
// convert exactly to the declared type t: VARCHAR takes every type (its text form), the
// others their own PostgreSQL types only (docs/sql.md, "PostgreSQL change data capture").
func cdcTypeFits(t sql.Type, typname string) bool {
	switch t.Kind {
	case sql.KindVarchar:
		return true
	case sql.KindBool:
		return typname == "bool"
	case sql.KindInt:
		return typname == "int2" || typname == "int4"
	case sql.KindBigInt:
		return typname == "int2" || typname == "int4" || typname == "int8"
	case sql.KindDouble:
		return typname == "float4" || typname == "float8"
	case sql.KindDecimal:
		return typname == "numeric" || typname == "int2" || typname == "int4" || typname == "int8"
	case sql.KindTimestamp:
		return typname == "timestamp" || typname == "timestamptz" || typname == "date"
	case sql.KindJSON:
		return typname == "json" || typname == "jsonb"
	}
	return false
}

// oidTypname names the built-in types by oid, for the relation messages (which carry oids).
var oidTypname = map[uint32]string{
	oidBool: "bool", oidInt8: "int8", oidInt2: "int2", oidInt4: "int4", oidText: "text", oidJSON: "json",
	oidFloat4: "float4", oidFloat8: "float8", oidBPChar: "bpchar", oidVarchar: "varchar", oidDate: "date",
	oidTimestamp: "timestamp", oidTimestampTZ: "timestamptz", oidNumeric: "numeric", oidJSONB: "jsonb",
}

// cdcDecoder decodes the pgoutput messages of one table into changelog rows of schema
// (the declared columns and the change column sql.ChangeColumn last).
type cdcDecoder struct {
	table  string // the PostgreSQL table, schema.name, as relation messages name it
	schema sql.Schema
	op     int // the change column's index in schema
	// oid is the table's oid as the catalog gave it when the reader started (0: the
	// table is known by its name only).
	oid uint32
	// rel is the table's relation id once a relation message named it (0 before); pos
	// maps each column of its tuples to its index in schema.
	rel uint32
	pos []int
	// truncates: a TRUNCATE of the table is a row of NULLs whose change column is
	// sql.OpTruncate (on_truncate = 'delete'); otherwise it is an error.
	truncates bool

	// The transaction being read: its rows and whether one is open.
	inTx bool
	rows []sql.Row
}

// cdcEvent is what one message means to the reader.
type cdcEvent struct {
	commit bool          // a transaction ended: its rows are complete
	end    pglogrepl.LSN // its end (a commit's TransactionEndLSN)
}

func newCDCDecoder(table string, schema sql.Schema) *cdcDecoder {
	return &cdcDecoder{table: table, schema: schema, op: schema.Index(sql.ChangeColumn)}
}

// decode reads one pgoutput message (the data of an XLogData message) at lsn. Rows of the
// table's changes are appended to d.rows; a commit is reported with its end. A message
// that cannot be read, or one rsql cannot follow (a changed column, a TRUNCATE, an update
// without its old row), is an error naming it.
func (d *cdcDecoder) decode(data []byte, lsn pglogrepl.LSN) (ev cdcEvent, err error) {
	defer func() {
		// The message parser indexes its input without checking every length: a
		// truncated message is an error here, not a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed pgoutput message at LSN %s: %v", lsn, r)
		}
	}()
	if len(data) == 0 {
		return ev, fmt.Errorf("empty pgoutput message at LSN %s", lsn)
	}
	if err := checkTuples(data); err != nil {
		return ev, fmt.Errorf("malformed pgoutput message at LSN %s: %v", lsn, err)
	}
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return ev, fmt.Errorf("malformed pgoutput message at LSN %s: %v", lsn, err)
	}
	switch m := m.(type) {
	case *pglogrepl.BeginMessage:
		d.inTx, d.rows = true, d.rows[:0]
	case *pglogrepl.CommitMessage:
		if !d.inTx {
			return ev, fmt.Errorf("pgoutput commit at LSN %s without a begin", lsn)
		}
		d.inTx = false
		return cdcEvent{commit: true, end: m.TransactionEndLSN}, nil
	case *pglogrepl.RelationMessage:
		name := m.Namespace + "." + m.RelationName
		switch {
		case d.oid != 0 && m.RelationID == d.oid && name != d.table:
			return ev, sql.Errorf(codeNotInState, "postgres-cdc %s: the table was renamed to %s at LSN %s; the job stops: declare the table again", d.table, name, lsn)
		case d.oid != 0 && m.RelationID != d.oid, d.oid == 0 && name != d.table:
			return ev, nil
		}
		return ev, d.relation(m, lsn)
	case *pglogrepl.InsertMessage:
		if m.RelationID != d.rel || d.rel == 0 {
			return ev, d.other(m.RelationID, lsn)
		}
		row, err := d.tuple(m.Tuple, nil, lsn, "inserted row")
		if err != nil {
			return ev, err
		}
		d.rows = append(d.rows, row)
	case *pglogrepl.UpdateMessage:
		if m.RelationID != d.rel || d.rel == 0 {
			return ev, d.other(m.RelationID, lsn)
		}
		if m.OldTupleType != pglogrepl.UpdateMessageTupleTypeOld || m.OldTuple == nil {
			return ev, sql.Errorf(codeNotInState, "postgres-cdc %s: an update at LSN %s came without its old row: the table needs REPLICA IDENTITY FULL (ALTER TABLE %s REPLICA IDENTITY FULL)", d.table, lsn, d.table)
		}
		old, err := d.tuple(m.OldTuple, nil, lsn, "old row of an update")
		if err != nil {
			return ev, err
		}
		row, err := d.tuple(m.NewTuple, old, lsn, "new row of an update")
		if err != nil {
			return ev, err
		}
		old[d.op] = sql.OpDelete
		d.rows = append(d.rows, old, row)
	case *pglogrepl.DeleteMessage:
		if m.RelationID != d.rel || d.rel == 0 {
			return ev, d.other(m.RelationID, lsn)
		}
		if m.OldTupleType != pglogrepl.DeleteMessageTupleTypeOld || m.OldTuple == nil {
			return ev, sql.Errorf(codeNotInState, "postgres-cdc %s: a delete at LSN %s came without the deleted row: the table needs REPLICA IDENTITY FULL (ALTER TABLE %s REPLICA IDENTITY FULL)", d.table, lsn, d.table)
		}
		old, err := d.tuple(m.OldTuple, nil, lsn, "deleted row")
		if err != nil {
			return ev, err
		}
		old[d.op] = sql.OpDelete
		d.rows = append(d.rows, old)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if id != d.rel || d.rel == 0 {
				continue
			}
			if !d.truncates {
				return ev, sql.Errorf(codeNotInState, "postgres-cdc %s: TRUNCATE at LSN %s, and the table's on_truncate is 'error'; the job stops here: start it afresh (a new job with a new slot) to read the table again, or declare the table with on_truncate = 'delete' to read a TRUNCATE as the deletion of every row", d.table, lsn)
			}
			row := make(sql.Row, len(d.schema))
			row[d.op] = sql.OpTruncate
			d.rows = append(d.rows, row)
			break
		}
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage, *pglogrepl.LogicalDecodingMessage:
	default:
		return ev, fmt.Errorf("unexpected pgoutput message %T at LSN %s", m, lsn)
	}
	return ev, nil
}

// other is a change of a relation that is not the table: only the publication's own tables
// are sent, so the publication holds others as well; they are skipped. A change of a
// relation before any relation message is an error (pgoutput names each relation first).
func (d *cdcDecoder) other(id uint32, lsn pglogrepl.LSN) error {
	if id == 0 {
		return fmt.Errorf("pgoutput change at LSN %s names relation 0", lsn)
	}
	return nil
}

// relation checks a relation message of the table against the declared columns: the same
// columns (by name, exactly or else ignoring case), each of a type that fits, and replica
// identity FULL. A difference stops the job, naming it.
func (d *cdcDecoder) relation(m *pglogrepl.RelationMessage, lsn pglogrepl.LSN) error {
	fail := func(format string, args ...any) error {
		return sql.Errorf(codeNotInState, "postgres-cdc %s: the table changed at LSN %s: %s; the job stops: declare the table again to match it", d.table, lsn, fmt.Sprintf(format, args...))
	}
	if m.ReplicaIdentity != 'f' {
		return fail("its replica identity is no longer FULL (ALTER TABLE %s REPLICA IDENTITY FULL)", d.table)
	}
	pos := make([]int, len(m.Columns))
	seen := make([]bool, len(d.schema))
	for i, c := range m.Columns {
		if c == nil {
			return fail("column #%d is missing from the relation message", i+1)
		}
		j := d.column(c.Name)
		if j < 0 {
			return fail("column %s was added", c.Name)
		}
		if seen[j] {
			return fail("column %s appears twice", c.Name)
		}
		seen[j] = true
		typ, ok := oidTypname[c.DataType]
		if !ok && d.schema[j].Type.Kind != sql.KindVarchar {
			return fail("column %s is of type oid %d, which does not convert to %s", c.Name, c.DataType, d.schema[j].Type)
		}
		if ok && !cdcTypeFits(d.schema[j].Type, typ) {
			return fail("column %s is now %s, which does not convert to %s", c.Name, typ, d.schema[j].Type)
		}
		pos[i] = j
	}
	var dropped []string
	for j, c := range d.schema {
		if j != d.op && !seen[j] {
			dropped = append(dropped, c.Name)
		}
	}
	if len(dropped) > 0 {
		return fail("column %s was dropped (or renamed)", strings.Join(dropped, ", "))
	}
	d.rel, d.pos = m.RelationID, pos
	return nil
}

// column is the index in schema of the column named name (exactly, or else ignoring case),
// or -1.
func (d *cdcDecoder) column(name string) int {
	for j, c := range d.schema {
		if j != d.op && c.Name == name {
			return j
		}
	}
	for j, c := range d.schema {
		if j != d.op && strings.EqualFold(c.Name, name) {
			return j
		}
	}
	return -1
}

// tuple converts a tuple of the table into a row of schema (the change column NULL). A
// value the tuple leaves out as an unchanged TOASTed value is taken from prev (the old row
// of an update), which REPLICA IDENTITY FULL always carries in full.
func (d *cdcDecoder) tuple(t *pglogrepl.TupleData, prev sql.Row, lsn pglogrepl.LSN, what string) (sql.Row, error) {
	if t == nil || len(t.Columns) != len(d.pos) {
		n := 0
		if t != nil {
			n = len(t.Columns)
		}
		return nil, fmt.Errorf("postgres-cdc %s: the %s at LSN %s has %d columns, the relation %d", d.table, what, lsn, n, len(d.pos))
	}
	row := make(sql.Row, len(d.schema))
	for i, c := range t.Columns {
		j := d.pos[i]
		col := d.schema[j]
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
		case pglogrepl.TupleDataTypeToast:
			if prev == nil {
				return nil, fmt.Errorf("postgres-cdc %s: column %s of the %s at LSN %s is an unchanged TOASTed value that was not sent", d.table, col.Name, what, lsn)
			}
			row[j] = prev[j]
		case pglogrepl.TupleDataTypeText:
			v, verr := decodePGText(string(c.Data), col.Type)
			if verr != nil {
				return nil, sql.Errorf(verr.Code, "postgres-cdc %s: column %s of the %s at LSN %s: %s does not convert to %s: %s", d.table, col.Name, what, lsn, quote(string(c.Data)), col.Type, verr.Message)
			}
			row[j] = v
		default:
			return nil, fmt.Errorf("postgres-cdc %s: column %s of the %s at LSN %s: value of kind %q (want text)", d.table, col.Name, what, lsn, c.DataType)
		}
	}
	return row, nil
}

// checkTuples checks that the tuples of an insert, update or delete message lie within it
// before the message parser reads them (it would allocate whatever length a value claims).
func checkTuples(data []byte) error {
	p := 5 // the message type and the relation id
	tuple := func() error {
		if p+2 > len(data) {
			return errors.New("truncated tuple")
		}
		n := int(binary.BigEndian.Uint16(data[p:]))
		p += 2
		for i := 0; i < n; i++ {
			if p >= len(data) {
				return fmt.Errorf("tuple column %d missing", i+1)
			}
			kind := data[p]
			p++
			switch kind {
			case 'n', 'u':
			case 't', 'b':
				if p+4 > len(data) {
					return fmt.Errorf("tuple column %d: truncated length", i+1)
				}
				l := binary.BigEndian.Uint32(data[p:])
				p += 4
				if uint64(l) > uint64(len(data)-p) {
					return fmt.Errorf("tuple column %d: length %d past the message's end", i+1, l)
				}
				p += int(l)
			default:
				return fmt.Errorf("tuple column %d: unknown kind %q", i+1, kind)
			}
		}
		return nil
	}
	tag := func() (byte, error) {
		if p >= len(data) {
			return 0, errors.New("truncated message")
		}
		p++
		return data[p-1], nil
	}
	switch data[0] {
	case 'I', 'U', 'D':
	case 'T':
		// The relation count, the options byte, then one id per relation.
		if len(data) < 6 || uint64(binary.BigEndian.Uint32(data[1:]))*4 != uint64(len(data)-6) {
			return errors.New("a truncate message whose relation count does not match its length")
		}
		return nil
	case 'R':
		// Every column takes at least 10 bytes.
		if len(data) < 7 {
			return errors.New("truncated relation message")
		}
		return nil
	default:
		return nil
	}
	t, err := tag()
	if err != nil {
		return err
	}
	if data[0] == 'U' && (t == 'K' || t == 'O') {
		if err := tuple(); err != nil {
			return err
		}
		if t, err = tag(); err != nil {
			return err
		}
	}
	if data[0] == 'D' && t != 'K' && t != 'O' || data[0] != 'D' && t != 'N' {
		return fmt.Errorf("unexpected tuple tag %q", t)
	}
	return tuple()
}
