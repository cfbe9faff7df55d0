package connectors

// The nexmark connector: a source that generates the events of the Nexmark benchmark
// (docs/nexmark.md) instead of reading them. One stream per event type:
//
//	CREATE STREAM bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
//	  url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
//	  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
//	WITH (connector = 'nexmark', table = 'bid', events = 10000000);
//
// person and auction streams of the same options see the persons and auctions of the same
// event sequence (the sellers and bidders of the bid stream are its persons), so the three
// streams are the three views nexmark-flink defines over its one generated table.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"rsql/connectors/options"
	"rsql/sql"
)

// Defaults of the nexmark source.
const (
	// DefaultNexmarkEventRate is the event-time rate when neither event_rate nor rate is
	// given: 10 million events per second of event time, the rate of the published
	// nexmark-flink suite (so windows over the same number of events see the same data).
	DefaultNexmarkEventRate = 10_000_000
	// DefaultNexmarkBaseTime is the event time of event 0: 2026-01-01T00:00:00Z.
	DefaultNexmarkBaseTime = 1_767_225_600_000
	// MaxNexmarkSplits bounds the splits option.
	MaxNexmarkSplits = 1024
)

// NexmarkOptions are the WITH options of a nexmark stream, parsed and checked.
type NexmarkOptions struct {
	Table NexmarkKind // table: 'person', 'auction' or 'bid' (required)
	// Events is the number of events of the whole sequence, all three types together
	// (events; 0 = unbounded). A bid stream over 10 M events has about 9.2 M rows.
	Events int64
	// Rate paces the generation: events per second of wall-clock time over all splits and
	// all types (rate; 0 = as fast as possible).
	Rate int64
	// EventRate is the event-time rate: event n happens at BaseTime + n/EventRate seconds
	// (event_rate; default: Rate when it is set, else DefaultNexmarkEventRate).
	EventRate int64
	// BaseTime is the event time of event 0 in epoch ms (base_time: epoch ms or RFC 3339;
	// default DefaultNexmarkBaseTime).
	BaseTime int64
	// Seed selects the random choices (seed; default 0). Equal options give equal events.
	Seed uint64
	// Splits is the number of splits (splits; default 1). The events come in epochs of 50
	// (1 person, 3 auctions, 46 bids); split s holds the epochs whose number is s modulo
	// Splits, so every split has all three types and runs through the same event times.
	Splits int
	// Format of the messages for runtimes that read message bodies (format): "nexmark"
	// (default; event numbers the format of that name turns into rows) or "json".
	Format string
}

// NexmarkOptionKeys are the WITH option keys the nexmark connector reads.
var NexmarkOptionKeys = options.NexmarkOptionKeys

// ErrNexmark is wrapped by every error of the nexmark connector's options and schema.
var ErrNexmark = errors.New("nexmark")

func nexmarkErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNexmark, fmt.Sprintf(format, args...))
}

// ParseNexmarkOptions reads the nexmark options of a stream's WITH list (other keys are
// ignored) and returns them with defaults filled in, or an error naming the option.
func ParseNexmarkOptions(opts map[string]string) (NexmarkOptions, error) {
	o := NexmarkOptions{BaseTime: DefaultNexmarkBaseTime, Splits: 1}
	switch f := strings.ToLower(opts["format"]); f {
	case "", "nexmark":
		o.Format = "nexmark"
	case "json":
		o.Format = "json"
	default:
		return o, nexmarkErr("format = %q: a nexmark stream's messages are 'nexmark' (event numbers, the default) or 'json'", opts["format"])
	}
	switch t := strings.ToLower(opts["table"]); t {
	case "person":
		o.Table = NexmarkPerson
	case "auction":
		o.Table = NexmarkAuction
	case "bid":
		o.Table = NexmarkBid
	case "":
		return o, nexmarkErr("the table option is missing: table = 'bid', 'auction' or 'person'")
	default:
		return o, nexmarkErr("table = %q: want 'bid', 'auction' or 'person'", opts["table"])
	}
	num := func(key string, lo, hi int64) (int64, bool, error) {
		s, ok := opts[key]
		if !ok {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v < lo || v > hi {
			return 0, false, nexmarkErr("%s = %q: want a whole number from %d to %d", key, s, lo, hi)
		}
		return v, true, nil
	}
	var err error
	if o.Events, _, err = num("events", 0, 1<<62); err != nil {
		return o, err
	}
	if o.Rate, _, err = num("rate", 0, 1<<40); err != nil {
		return o, err
	}
	var set bool
	if o.EventRate, set, err = num("event_rate", 1, 1<<40); err != nil {
		return o, err
	}
	if !set {
		o.EventRate = DefaultNexmarkEventRate
		if o.Rate > 0 {
			o.EventRate = o.Rate
		}
	}
	var splits int64
	if splits, set, err = num("splits", 1, MaxNexmarkSplits); err != nil {
		return o, err
	} else if set {
		o.Splits = int(splits)
	}
	if s, ok := opts["seed"]; ok {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			i, ierr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if ierr != nil {
				return o, nexmarkErr("seed = %q: want a whole number", s)
			}
			v = uint64(i)
		}
		o.Seed = v
	}
	if s, ok := opts["base_time"]; ok {
		if v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
			o.BaseTime = v
		} else if ms, ok := sql.ParseTimestamp(s); ok {
			o.BaseTime = ms
		} else {
			return o, nexmarkErr("base_time = %q: want epoch milliseconds or an RFC 3339 time", s)
		}
	}
	return o, nil
}

// nexmarkField is one column a nexmark table can produce.
type nexmarkField uint8

const (
	nfNone nexmarkField = iota
	// person
	nfPersonID
	nfPersonName
	nfPersonEmail
	nfPersonCard
	nfPersonCity
	nfPersonState
	nfPersonTime
	nfPersonExtra
	// auction
	nfAuctionID
	nfAuctionItem
	nfAuctionDesc
	nfAuctionInitial
	nfAuctionReserve
	nfAuctionTime
	nfAuctionExpires
	nfAuctionSeller
	nfAuctionCategory
	nfAuctionExtra
	// bid
	nfBidAuction
	nfBidBidder
	nfBidPrice
	nfBidChannel
	nfBidURL
	nfBidTime
	nfBidExtra
	// any table: the wall-clock time the row was generated
	nfProcTime
)

type nexmarkFieldDef struct {
	name  string // as documented (snake case)
	field nexmarkField
	kind  sql.Kind // BIGINT, VARCHAR or TIMESTAMP
}

var nexmarkFields = map[NexmarkKind][]nexmarkFieldDef{
	NexmarkPerson: {
		{"id", nfPersonID, sql.KindBigInt}, {"name", nfPersonName, sql.KindVarchar},
		{"email_address", nfPersonEmail, sql.KindVarchar}, {"credit_card", nfPersonCard, sql.KindVarchar},
		{"city", nfPersonCity, sql.KindVarchar}, {"state", nfPersonState, sql.KindVarchar},
		{"date_time", nfPersonTime, sql.KindTimestamp}, {"extra", nfPersonExtra, sql.KindVarchar},
	},
	NexmarkAuction: {
		{"id", nfAuctionID, sql.KindBigInt}, {"item_name", nfAuctionItem, sql.KindVarchar},
		{"description", nfAuctionDesc, sql.KindVarchar}, {"initial_bid", nfAuctionInitial, sql.KindBigInt},
		{"reserve", nfAuctionReserve, sql.KindBigInt}, {"date_time", nfAuctionTime, sql.KindTimestamp},
		{"expires", nfAuctionExpires, sql.KindTimestamp}, {"seller", nfAuctionSeller, sql.KindBigInt},
		{"category", nfAuctionCategory, sql.KindBigInt}, {"extra", nfAuctionExtra, sql.KindVarchar},
	},
	NexmarkBid: {
		{"auction", nfBidAuction, sql.KindBigInt}, {"bidder", nfBidBidder, sql.KindBigInt},
		{"price", nfBidPrice, sql.KindBigInt}, {"channel", nfBidChannel, sql.KindVarchar},
		{"url", nfBidURL, sql.KindVarchar}, {"date_time", nfBidTime, sql.KindTimestamp},
		{"extra", nfBidExtra, sql.KindVarchar},
	},
}

// normField folds a column name for matching: case and underscores do not matter, so
// date_time, dateTime and DATETIME name the same field.
func normField(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}

// nexmarkColumns maps the columns of schema to the fields of table. Integer fields may be
// declared BIGINT or INT; every column must name a field of the table (or p_time /
// proctime: the wall-clock time the row was generated, for processing-time windows).
func nexmarkColumns(table NexmarkKind, schema sql.Schema) ([]nexmarkField, error) {
	out := make([]nexmarkField, len(schema))
	defs := nexmarkFields[table]
	for i, c := range schema {
		n := normField(c.Name)
		var def *nexmarkFieldDef
		for j := range defs {
			if normField(defs[j].name) == n || n == "email" && defs[j].field == nfPersonEmail {
				def = &defs[j]
				break
			}
		}
		if n == "ptime" || n == "proctime" {
			def = &nexmarkFieldDef{name: c.Name, field: nfProcTime, kind: sql.KindTimestamp}
		}
		if def == nil {
			names := make([]string, len(defs))
			for j, d := range defs {
				names[j] = d.name
			}
			return nil, nexmarkErr("column %s is not a field of the %s table (fields: %s; and p_time, the generation time)",
				c.Name, table, strings.Join(names, ", "))
		}
		k := c.Type.Kind
		ok := k == def.kind || def.kind == sql.KindBigInt && k == sql.KindInt
		if !ok {
			return nil, nexmarkErr("column %s is %s but the %s field %s is %s", c.Name, c.Type, table, def.name, def.kind)
		}
		out[i] = def.field
	}
	return out, nil
}

// CheckNexmarkStream checks a nexmark stream's options and columns (CREATE STREAM).
func CheckNexmarkStream(opts map[string]string, schema sql.Schema) error {
	o, err := ParseNexmarkOptions(opts)
	if err != nil {
		return err
	}
	_, err = nexmarkColumns(o.Table, schema)
	return err
}

// RowSource is a Source whose splits can also be read as typed rows, with no message
// bodies to encode and decode. A runtime that knows it reads rows through OpenRows; one
// that does not reads messages through Open and decodes them with the stream's format.
type RowSource interface {
	Source
	// OpenRows reads split from offset like Open. Its rows hold the columns the source was
	// opened for (for a planner.SourceSpec: Columns, or the whole Schema when nil), in
	// that order, with the types of the schema.
	OpenRows(ctx context.Context, split string, offset int64) (RowReader, error)
}

// RowReader reads one split's rows in offset order.
type RowReader interface {
	// ReadRows appends up to max rows to b. Like SplitReader.Read it returns
	// ErrEndOfSplit when a bounded split is exhausted (possibly with the last rows), and
	// may return no rows and a nil error when nothing is due yet.
	ReadRows(ctx context.Context, b *RowBatch, max int) error
	Close() error
}

// RowBatch is rows of a fixed width in one flat slice, so a batch costs no allocation
// per row. Appenders reuse its slices; the caller resets it with Values[:0], Offsets[:0].
type RowBatch struct {
	Width   int         // values per row
	Values  []sql.Value // row i is Values[i*Width : (i+1)*Width]
	Offsets []int64     // the offset of row i
}

// Len is the number of rows in b.
func (b *RowBatch) Len() int { return len(b.Offsets) }

// Row returns row i of b (a view into Values).
func (b *RowBatch) Row(i int) sql.Row { return b.Values[i*b.Width : (i+1)*b.Width] }

// NexmarkSource generates the events of one Nexmark table. Its rows (OpenRows) hold the
// source's columns, typed. Its messages (Open) are for runtimes that decode message bodies
// with the stream's format: with format 'nexmark' (the default) a body is the event's
// number and the generator's parameters, and the format computes the row from them
// (nexmark_format.go), so no text is written or parsed; with format 'json' a body is the
// row as a JSON object keyed by the column names.
// Offsets: a record's offset is the position of its event number among the event numbers
// of its split (of all types: the offsets of a table skip the other types' events), so a
// reader opened at an offset resumes exactly there. NexmarkEventNumber maps it back.
type NexmarkSource struct {
	opts   NexmarkOptions
	gen    *NexmarkGenerator
	schema sql.Schema // the columns rows hold
	maker  nexmarkRowMaker
	json   bool   // messages are JSON objects, not event numbers
	mask   uint64 // the columns read, as bits of the declared schema (event-number bodies)
	// now and sleep are the clock of the pacing (rate); tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	open map[nexmarkReaderCloser]struct{} // guarded by mu
}

type nexmarkReaderCloser interface{ Close() error }

var _ RowSource = (*NexmarkSource)(nil)

// OpenNexmarkSource makes the source of a nexmark stream from its WITH options, its
// declared schema and the columns a job reads (indexes into schema; nil = all).
func OpenNexmarkSource(opts map[string]string, schema sql.Schema, columns []int) (*NexmarkSource, error) {
	o, err := ParseNexmarkOptions(opts)
	if err != nil {
		return nil, err
	}
	return NewNexmarkSource(o, schema, columns)
}

// NewNexmarkSource makes a nexmark source from parsed options.
func NewNexmarkSource(o NexmarkOptions, schema sql.Schema, columns []int) (*NexmarkSource, error) {
	if o.Splits <= 0 {
		o.Splits = 1
	}
	if o.EventRate <= 0 {
		o.EventRate = DefaultNexmarkEventRate
	}
	if o.Table < NexmarkPerson || o.Table > NexmarkBid {
		return nil, nexmarkErr("no table (person, auction or bid)")
	}
	if len(schema) > 64 {
		return nil, nexmarkErr("%d columns: a nexmark stream has at most 64", len(schema))
	}
	if columns == nil {
		columns = make([]int, len(schema))
		for i := range columns {
			columns[i] = i
		}
	}
	cols := make(sql.Schema, len(columns))
	var mask uint64
	for i, c := range columns {
		if c < 0 || c >= len(schema) {
			return nil, nexmarkErr("column index %d out of the schema's %d columns", c, len(schema))
		}
		cols[i] = schema[c]
		mask |= 1 << c
	}
	gen := NewNexmarkGenerator(o.Seed, o.EventRate, o.BaseTime)
	maker, err := newNexmarkRowMaker(gen, o.Table, cols)
	if err != nil {
		return nil, err
	}
	if _, err := newNexmarkRowMaker(gen, o.Table, schema); err != nil {
		return nil, err
	}
	return &NexmarkSource{opts: o, gen: gen, schema: cols, maker: maker, json: o.Format == "json", mask: mask,
		now: time.Now, sleep: sleepCtx, open: map[nexmarkReaderCloser]struct{}{}}, nil
}

// nexmarkRowMaker computes the values of a table's columns for an event number.
type nexmarkRowMaker struct {
	gen      *NexmarkGenerator
	table    NexmarkKind
	fields   []nexmarkField // per column; nfNone: NULL (a column not read)
	intCols  []int          // columns declared INT (their values are made INT, not BIGINT)
	procTime bool           // some column is p_time
}

func newNexmarkRowMaker(gen *NexmarkGenerator, table NexmarkKind, schema sql.Schema) (nexmarkRowMaker, error) {
	fields, err := nexmarkColumns(table, schema)
	if err != nil {
		return nexmarkRowMaker{}, err
	}
	m := nexmarkRowMaker{gen: gen, table: table, fields: fields}
	for i, c := range schema {
		if c.Type.Kind == sql.KindInt {
			m.intCols = append(m.intCols, i)
		}
		m.procTime = m.procTime || fields[i] == nfProcTime
	}
	return m, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Options returns the source's options with defaults filled in.
func (s *NexmarkSource) Options() NexmarkOptions { return s.opts }

// Generator returns the source's event generator.
func (s *NexmarkSource) Generator() *NexmarkGenerator { return s.gen }

// Splits returns "0" .. "<splits-1>".
func (s *NexmarkSource) Splits(ctx context.Context) ([]string, error) {
	out := make([]string, s.opts.Splits)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

// Bounded is true when the events option is set.
func (s *NexmarkSource) Bounded() bool { return s.opts.Events > 0 }

// Close closes the readers still open.
func (s *NexmarkSource) Close() error {
	s.mu.Lock()
	rs := make([]nexmarkReaderCloser, 0, len(s.open))
	for r := range s.open {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	for _, r := range rs {
		r.Close()
	}
	return nil
}

func (s *NexmarkSource) newGen(split string, offset int64) (*nexmarkGenReader, error) {
	k, err := strconv.Atoi(split)
	if err != nil || k < 0 || k >= s.opts.Splits || strconv.Itoa(k) != split {
		return nil, nexmarkErr("no split %q (splits are 0 to %d)", split, s.opts.Splits-1)
	}
	if offset < 0 {
		return nil, nexmarkErr("split %s: negative offset %d", split, offset)
	}
	r := &nexmarkGenReader{src: s, split: int64(k), name: split, next: offset}
	r.first = r.eventNumber(offset)
	return r, nil
}

// Open reads split from offset; message bodies are JSON objects of the source's columns.
func (s *NexmarkSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	g, err := s.newGen(split, offset)
	if err != nil {
		return nil, err
	}
	r := newNexmarkMsgReader(g)
	s.track(r, true)
	return r, nil
}

// OpenRows reads split from offset as rows of the source's columns.
func (s *NexmarkSource) OpenRows(ctx context.Context, split string, offset int64) (RowReader, error) {
	g, err := s.newGen(split, offset)
	if err != nil {
		return nil, err
	}
	r := &nexmarkRowReader{g: g}
	s.track(r, true)
	return r, nil
}

func (s *NexmarkSource) track(r nexmarkReaderCloser, add bool) {
	s.mu.Lock()
	if add {
		s.open[r] = struct{}{}
	} else {
		delete(s.open, r)
	}
	s.mu.Unlock()
}

// nexmarkGenReader walks one split's event numbers and picks those of its table. It is
// owned by one reader (one goroutine).
type nexmarkGenReader struct {
	src    *NexmarkSource
	split  int64
	name   string // split as text
	next   int64  // offset of the next event number to look at
	first  int64  // event number the reader started at (pacing)
	start  time.Time
	closed bool
}

func (g *nexmarkGenReader) eventNumber(offset int64) int64 {
	return NexmarkEventNumber(offset, g.split, int64(g.src.opts.Splits))
}

// NexmarkEventNumber is the event number at offset of split split of splits: split s
// holds the epochs (runs of 50 event numbers) s, s + splits, s + 2 splits, ...
func NexmarkEventNumber(offset, split, splits int64) int64 {
	return (offset/nexmarkTotalProportion*splits+split)*nexmarkTotalProportion + offset%nexmarkTotalProportion
}

// nexmarkRange is the range [lo, hi) of the event numbers of an epoch (n mod 50) that are
// of table's type.
func nexmarkRange(table NexmarkKind) (lo, hi int64) {
	switch table {
	case NexmarkPerson:
		return 0, nexmarkPersonProportion
	case NexmarkAuction:
		return nexmarkPersonProportion, nexmarkPersonProportion + nexmarkAuctionProportion
	}
	return nexmarkPersonProportion + nexmarkAuctionProportion, nexmarkTotalProportion
}

// due returns how long to wait before event n may be generated (rate), 0 when it may now.
func (g *nexmarkGenReader) due(n int64, now time.Time) time.Duration {
	rate := g.src.opts.Rate
	if rate <= 0 {
		return 0
	}
	if g.start.IsZero() {
		g.start = now
	}
	d := n - g.first
	at := g.start.Add(time.Duration(d/rate)*time.Second + time.Duration((d%rate)*int64(time.Second)/rate))
	if w := at.Sub(now); w > 0 {
		return w
	}
	return 0
}

// batch calls emit(event number, offset, generation time in epoch ms) for up to max events
// of the table, in order. It returns ErrEndOfSplit when the split has no more events, after
// the events it emitted.
func (g *nexmarkGenReader) batch(ctx context.Context, max int, emit func(n, off, procTime int64)) error {
	if g.closed {
		return nexmarkErr("read after close")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if max <= 0 {
		max = 1
	}
	src := g.src
	events, splits := src.opts.Events, int64(src.opts.Splits)
	lo, hi := nexmarkRange(src.opts.Table)
	paced := src.opts.Rate > 0
	var now time.Time
	procTime := int64(0)
	if paced || src.maker.procTime {
		now = src.now()
		procTime = now.UnixMilli()
	}
	rows := 0
	for rows < max {
		// Skip to the next offset of the table's type: the same epoch or the next.
		if r := g.next % nexmarkTotalProportion; r < lo {
			g.next += lo - r
		} else if r >= hi {
			g.next += nexmarkTotalProportion - r + lo
		}
		n := NexmarkEventNumber(g.next, g.split, splits)
		if events > 0 && n >= events {
			return ErrEndOfSplit
		}
		if paced {
			if w := g.due(n, now); w > 0 {
				if rows > 0 {
					return nil
				}
				// Nothing due: wait a little and return empty, so the caller can check
				// idleness (SplitReader's contract) and come back.
				return src.sleep(ctx, min(w, 100*time.Millisecond))
			}
		}
		emit(n, g.next, procTime)
		g.next++
		rows++
	}
	return nil
}

// appendRow appends the values of event n's columns. A bid computes only the fields
// asked for; a person or an auction (8 % of the events) is generated whole.
func (m *nexmarkRowMaker) appendRow(dst []sql.Value, n, procTime int64) []sql.Value {
	g := m.gen
	switch m.table {
	case NexmarkBid:
		for _, f := range m.fields {
			var v sql.Value
			switch f {
			case nfBidAuction:
				v = sql.BigInt(g.BidAuction(n))
			case nfBidBidder:
				v = sql.BigInt(g.BidBidder(n))
			case nfBidPrice:
				v = sql.BigInt(g.BidPrice(n))
			case nfBidChannel:
				c, _ := g.BidChannel(n)
				v = sql.Varchar(c)
			case nfBidURL:
				_, u := g.BidChannel(n)
				v = sql.Varchar(u)
			case nfBidTime:
				v = sql.Timestamp(g.Timestamp(n))
			case nfBidExtra:
				v = sql.Varchar(g.BidExtra(n))
			case nfProcTime:
				v = sql.Timestamp(procTime)
			}
			dst = append(dst, v)
		}
	case NexmarkPerson:
		p := g.Person(n)
		for _, f := range m.fields {
			var v sql.Value
			switch f {
			case nfPersonID:
				v = sql.BigInt(p.ID)
			case nfPersonName:
				v = sql.Varchar(p.Name)
			case nfPersonEmail:
				v = sql.Varchar(p.EmailAddress)
			case nfPersonCard:
				v = sql.Varchar(p.CreditCard)
			case nfPersonCity:
				v = sql.Varchar(p.City)
			case nfPersonState:
				v = sql.Varchar(p.State)
			case nfPersonTime:
				v = sql.Timestamp(p.DateTime)
			case nfPersonExtra:
				v = sql.Varchar(p.Extra)
			case nfProcTime:
				v = sql.Timestamp(procTime)
			}
			dst = append(dst, v)
		}
	case NexmarkAuction:
		a := g.Auction(n)
		for _, f := range m.fields {
			var v sql.Value
			switch f {
			case nfAuctionID:
				v = sql.BigInt(a.ID)
			case nfAuctionItem:
				v = sql.Varchar(a.ItemName)
			case nfAuctionDesc:
				v = sql.Varchar(a.Description)
			case nfAuctionInitial:
				v = sql.BigInt(a.InitialBid)
			case nfAuctionReserve:
				v = sql.BigInt(a.Reserve)
			case nfAuctionTime:
				v = sql.Timestamp(a.DateTime)
			case nfAuctionExpires:
				v = sql.Timestamp(a.Expires)
			case nfAuctionSeller:
				v = sql.BigInt(a.Seller)
			case nfAuctionCategory:
				v = sql.BigInt(a.Category)
			case nfAuctionExtra:
				v = sql.Varchar(a.Extra)
			case nfProcTime:
				v = sql.Timestamp(procTime)
			}
			dst = append(dst, v)
		}
	}
	row := dst[len(dst)-len(m.fields):]
	for _, i := range m.intCols {
		if row[i].K == sql.KindBigInt {
			row[i].K = sql.KindInt
		}
	}
	return dst
}

// nexmarkRowReader is a RowReader over a split.
type nexmarkRowReader struct{ g *nexmarkGenReader }

func (r *nexmarkRowReader) ReadRows(ctx context.Context, b *RowBatch, max int) error {
	m := &r.g.src.maker
	b.Width = len(m.fields)
	return r.g.batch(ctx, max, func(n, off, procTime int64) {
		b.Values = m.appendRow(b.Values, n, procTime)
		b.Offsets = append(b.Offsets, off)
	})
}

func (r *nexmarkRowReader) Close() error {
	if !r.g.closed {
		r.g.closed = true
		r.g.src.track(r, false)
	}
	return nil
}

// nexmarkMsgReader is the SplitReader of Open. All bodies of a batch share one new block,
// so they stay valid after the next Read. JSON bodies write timestamps as epoch
// milliseconds and strings as they are, since every string the generator makes is
// printable ASCII without quotes or backslashes (TestNexmarkStringsNeedNoEscaping).
type nexmarkMsgReader struct {
	g     *nexmarkGenReader
	keys  [][]byte // JSON: `"name":` per column, the first with '{' before it
	vals  []sql.Value
	block []byte
	ends  []int
	offs  []int64
	avg   int // bytes per body seen so far, to size the next block
}

func newNexmarkMsgReader(g *nexmarkGenReader) *nexmarkMsgReader {
	r := &nexmarkMsgReader{g: g}
	if g.src.json {
		for i, c := range g.src.schema {
			k := []byte{','}
			if i == 0 {
				k[0] = '{'
			}
			k = appendJSONString(k, c.Name)
			r.keys = append(r.keys, append(k, ':'))
		}
	}
	return r
}

func (r *nexmarkMsgReader) Read(ctx context.Context, buf []Message, limit int) ([]Message, error) {
	src := r.g.src
	r.offs, r.ends = r.offs[:0], r.ends[:0]
	r.block = make([]byte, 0, max(limit, 1)*max(r.avg, nexmarkBodySize)+256)
	w := len(src.schema)
	hdr := nexmarkBodyHeader(src.opts, src.mask)
	err := r.g.batch(ctx, limit, func(n, off, procTime int64) {
		if src.json {
			r.vals = src.maker.appendRow(r.vals[:0], n, procTime)
			for j, v := range r.vals[:w] {
				r.block = append(r.block, r.keys[j]...)
				if v.K == sql.KindVarchar {
					r.block = append(r.block, '"')
					r.block = append(r.block, v.S...)
					r.block = append(r.block, '"')
				} else {
					r.block = strconv.AppendInt(r.block, v.I, 10)
				}
			}
			r.block = append(r.block, '}')
		} else {
			r.block = appendNexmarkBody(r.block, &hdr, n, procTime)
		}
		r.ends = append(r.ends, len(r.block))
		r.offs = append(r.offs, off)
	})
	if len(r.offs) > 0 {
		r.avg = len(r.block)/len(r.offs) + 1
	}
	start := 0
	split := r.g.name
	for i, off := range r.offs {
		end := r.ends[i]
		buf = append(buf, Message{Offset: off, Body: r.block[start:end:end], Split: split})
		start = end
	}
	r.block = nil
	return buf, err
}

func (r *nexmarkMsgReader) Close() error {
	if !r.g.closed {
		r.g.closed = true
		r.g.src.track(r, false)
	}
	return nil
}
