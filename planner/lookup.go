package planner

import (
	"strconv"
	"strings"
	"time"

	"rsql/connectors/options"
	"rsql/sql"
)

// Lookup joins (docs/sql.md, "Lookup joins"): the right side is a table of an external
// database (a connector that can be looked up by key, such as postgres), read by primary
// key for each row of the left side when the row is processed. The table is not a stream:
// nothing of it is scanned or exchanged. The join is one operator at the end of the left
// side's stage (LookupJoinNode), so the left rows are not exchanged either: each process
// caches the keys its own splits ask for. An exchange on the key would make the caches of
// a job's instances disjoint, at the price of a shuffle topic for every row; the cache is
// small next to that.

// lookupJoin finishes the logical planning of a join with table t of an external database:
// the connector must be one that can be looked up, and FOR SYSTEM_TIME AS OF, when given,
// must be a processing time (the database has only its current rows).
func lookupJoin(j *Join, f *sql.FromJoin, t *sql.Relation, lw int) error {
	kind, ok := options.Lookup(t.Connector())
	if !ok || !kind.Lookupable {
		return errorf(sql.CodeNotSupported, "table %s has connector %s, which cannot be joined: a table is a changelog of versions (connector broker or file) or a table of a database looked up by key (connector postgres)", t.Name, t.Connector())
	}
	o, err := options.ParseLookup(t.Connector(), t.Name, t.Options)
	if err != nil {
		return errorf(sql.CodeInvalidValue, "table %s: %v", t.Name, err)
	}
	if f.AsOf != nil {
		if c, ok := f.AsOf.(*sql.ColumnRef); ok && c.Index < lw && c.Index < len(f.LeftAttrs) && f.LeftAttrs[c.Index].Time {
			return errorf(sql.CodeNotSupported, "table %s is looked up in its database, which holds only its current rows: FOR SYSTEM_TIME AS OF %s asks for the version valid at an event time; join it in processing time (FOR SYSTEM_TIME AS OF PROCTIME(), or without FOR SYSTEM_TIME)", t.Name, f.AsOf)
		}
	}
	j.Mode, j.Lookup = JoinLookup, o
	return nil
}

// lookupText is what EXPLAIN shows of a lookup join's table (its options o): the external
// table and the cache.
func lookupText(t *sql.Relation, o options.LookupOptions) string {
	if t == nil {
		return ""
	}
	if o.Connector == "file" {
		return " table=" + o.Target + " (read into memory at start)"
	}
	return " table=" + o.Target + " cache_ttl=" + durationText(o.CacheTTL) + " cache_rows=" + strconv.Itoa(o.CacheRows)
}

func durationText(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// LookupJoinNode joins each row of its one input (the left side) with the rows of an
// external table whose key columns equal the row's LeftKeys (a lookup join). Its row is
// the input row followed by the table's Columns (NULLs for a LEFT join's unmatched row);
// rows come out in input order.
type LookupJoinNode struct {
	Kind sql.JoinKind
	// Table is the rsql table; Connector and Options (parsed when the join was planned)
	// open it (connectors.LookupSpec in package connectors).
	Table     string
	Connector string
	Options   options.LookupOptions
	// Columns are the table's columns the join reads, in the right row's order;
	// KeyColumns the index in Columns of each key column, in the order of LeftKeys.
	// TableSchema is every declared column of the table, in order, without the hidden
	// change column (a file table's csv fields are in this order).
	Columns     sql.Schema
	TableSchema sql.Schema
	KeyColumns  []int
	// VersionTime is the index in TableSchema of the table's version time (its WATERMARK
	// column), -1 when it declares none: of a file's lines of one key, the one with the
	// greatest version time is the key's row.
	VersionTime int
	// LeftKeys are compiled over the input row, RightKeys over the right row, each pair of
	// one type (the key's value in the declared column type is LeftKeys cast to it).
	LeftKeys, RightKeys []Evaluator
	// Residual, over the joined row, is the rest of ON (nil: none).
	Residual  Evaluator
	LeftWidth int
	Schema    sql.Schema
	Text      string // the logical Join's description, for EXPLAIN
}

func (*LookupJoinNode) physicalNode() {}

func (n *LookupJoinNode) explain(sql.Schema) ([]string, sql.Schema) {
	return []string{n.Text}, n.Schema
}

// OutSchema is the node's output row.
func (n *LookupJoinNode) OutSchema(sql.Schema) sql.Schema { return n.Schema }

// lookupJoin builds a lookup join: the left side's plan, then the LookupJoinNode in its
// stage. The right side is the table's Scan, pruned to the columns the query reads.
func (b *builder) lookupJoin(n *Join) (sub, error) {
	scan, ok := n.Right.(*Scan)
	if !ok || n.Table == nil || scan.Relation != n.Table {
		return sub{}, errorf(sql.CodeInternal, "the right side of a lookup join is %s, not a scan of its table", n.Right)
	}
	s, err := b.build(n.Left)
	if err != nil {
		return s, err
	}
	ln := &LookupJoinNode{Kind: n.Kind, Table: n.Table.Name, Connector: n.Table.Connector(), Options: n.Lookup,
		Columns: scan.Schema(), LeftWidth: len(s.row), Schema: n.Schema(), Text: n.String(), VersionTime: -1}
	for i, c := range n.Table.Schema {
		if c.Name != sql.ChangeColumn {
			if i == n.Table.EventTime {
				ln.VersionTime = len(ln.TableSchema)
			}
			ln.TableSchema = append(ln.TableSchema, c)
		}
	}
	for i := range n.LeftKeys {
		c, ok := unwrapCast(n.RightKeys[i]).(*sql.ColumnRef)
		if !ok || c.Index < 0 || c.Index >= len(ln.Columns) {
			return sub{}, errorf(sql.CodeInternal, "lookup join key %s is not a column of table %s", n.RightKeys[i], n.Table.Name)
		}
		ln.KeyColumns = append(ln.KeyColumns, c.Index)
		lk, err := compile(n.LeftKeys[i], "join key")
		if err != nil {
			return sub{}, err
		}
		rk, err := compile(n.RightKeys[i], "join key")
		if err != nil {
			return sub{}, err
		}
		ln.LeftKeys, ln.RightKeys = append(ln.LeftKeys, lk), append(ln.RightKeys, rk)
	}
	if n.Residual != nil {
		f, err := compile(n.Residual, "join condition")
		if err != nil {
			return sub{}, err
		}
		ln.Residual = f
	}
	return b.addOp(s, ln, n.Schema()), nil
}

// checkReadable refuses to read a relation whose connector cannot be read as a stream (a
// lookup table, a write-only connector) with 0A000 at planning time.
func checkReadable(rel *sql.Relation) error {
	kind, ok := options.Lookup(rel.Connector())
	if !ok || kind.Readable {
		return nil
	}
	if kind.Lookupable {
		return errorf(sql.CodeNotSupported, "table %s is a table of a database (connector %s): it is not a stream and is only read by a lookup join, as the right side of FROM stream JOIN %s ON stream.k = %s.key", rel.Name, kind.Name, rel.Name, rel.Name)
	}
	return errorf(sql.CodeNotSupported, "%s cannot be read: the %s connector is write-only", rel.Name, kind.Name)
}

// checkWritable refuses a sink whose connector cannot be written (a lookup table, a
// read-only connector) with 0A000 at planning time.
func checkWritable(s SinkSpec) error {
	if s.Stream == "" {
		return nil
	}
	c := s.Connector
	if c == "" {
		c = s.Options.Get("connector")
	}
	kind, ok := options.Lookup(c)
	if !ok || kind.Writable || c == "" {
		return nil
	}
	if kind.Lookupable {
		return errorf(sql.CodeNotSupported, "%s is a table of a database (connector %s): rsql only looks rows up in it and never writes it", s.Stream, kind.Name)
	}
	return errorf(sql.CodeNotSupported, "%s cannot be written: the %s connector is read-only", s.Stream, strings.ToLower(kind.Name))
}
