package connectors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/sql"
)

var (
	nexBidSchema = sql.Schema{{Name: "auction", Type: sql.TypeBigInt}, {Name: "bidder", Type: sql.TypeBigInt},
		{Name: "price", Type: sql.TypeBigInt}, {Name: "channel", Type: sql.TypeVarchar}, {Name: "url", Type: sql.TypeVarchar},
		{Name: "date_time", Type: sql.TypeTimestamp}, {Name: "extra", Type: sql.TypeVarchar}}
	nexPersonSchema = sql.Schema{{Name: "id", Type: sql.TypeBigInt}, {Name: "name", Type: sql.TypeVarchar},
		{Name: "email_address", Type: sql.TypeVarchar}, {Name: "credit_card", Type: sql.TypeVarchar},
		{Name: "city", Type: sql.TypeVarchar}, {Name: "state", Type: sql.TypeVarchar},
		{Name: "date_time", Type: sql.TypeTimestamp}, {Name: "extra", Type: sql.TypeVarchar}}
	nexAuctionSchema = sql.Schema{{Name: "id", Type: sql.TypeBigInt}, {Name: "item_name", Type: sql.TypeVarchar},
		{Name: "description", Type: sql.TypeVarchar}, {Name: "initial_bid", Type: sql.TypeBigInt},
		{Name: "reserve", Type: sql.TypeBigInt}, {Name: "date_time", Type: sql.TypeTimestamp},
		{Name: "expires", Type: sql.TypeTimestamp}, {Name: "seller", Type: sql.TypeBigInt},
		{Name: "category", Type: sql.TypeBigInt}, {Name: "extra", Type: sql.TypeVarchar}}
)

func nexSchema(table string) sql.Schema {
	switch table {
	case "person":
		return nexPersonSchema
	case "auction":
		return nexAuctionSchema
	}
	return nexBidSchema
}

func TestNexmarkProportionsAndIDs(t *testing.T) {
	g := NewNexmarkGenerator(0, 10000, 0)
	counts := map[NexmarkKind]int{}
	nextPerson, nextAuction := int64(1000), int64(1000)
	for n := int64(0); n < 50_000; n++ {
		k := NexmarkKindOf(n)
		counts[k]++
		switch k {
		case NexmarkPerson:
			if p := g.Person(n); p.ID != nextPerson {
				t.Fatalf("event %d: person id %d, want %d", n, p.ID, nextPerson)
			}
			nextPerson++
		case NexmarkAuction:
			if a := g.Auction(n); a.ID != nextAuction {
				t.Fatalf("event %d: auction id %d, want %d", n, a.ID, nextAuction)
			}
			nextAuction++
		}
	}
	if counts[NexmarkPerson] != 1000 || counts[NexmarkAuction] != 3000 || counts[NexmarkBid] != 46000 {
		t.Fatalf("kinds over 50,000 events: %v, want 1,000 persons, 3,000 auctions, 46,000 bids", counts)
	}
	if NexmarkKindOf(0) != NexmarkPerson || NexmarkKindOf(1) != NexmarkAuction || NexmarkKindOf(4) != NexmarkBid {
		t.Fatalf("the first events are not person, auctions, bids")
	}
}

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %.4f, want within [%.4f, %.4f]", what, got, lo, hi)
	}
}

func TestNexmarkBidDistributions(t *testing.T) {
	g := NewNexmarkGenerator(7, 10000, 0)
	var bids, hotAuction, hotBidder, hotChannel int
	hot := map[string]int{}
	var logPrice float64
	var size float64
	urlRE := regexp.MustCompile(`^https://www\.nexmark\.com/[a-z_]{3,4}/[a-z_]{3,4}/[a-z_]{3,4}/item\.htm\?query=1(&channel_id=-?\d+)?$`)
	for n := int64(0); n < 500_000; n++ {
		if NexmarkKindOf(n) != NexmarkBid {
			continue
		}
		b := g.Bid(n)
		bids++
		last := lastAuction(n)
		if b.Auction == last/100*100+1000 {
			hotAuction++
		}
		if b.Auction < max(last-100, 0)+1000 || b.Auction > last+10+1000 {
			t.Fatalf("event %d: auction %d outside the in-flight range around %d", n, b.Auction, last+1000)
		}
		people := lastPerson(n) + 1
		if b.Bidder == (people-1)/100*100+1+1000 {
			hotBidder++
		}
		if b.Bidder < people-min(people, 1000)+1000 || b.Bidder >= people+10+1000 {
			t.Fatalf("event %d: bidder %d outside the active people before %d", n, b.Bidder, people+1000)
		}
		if b.Price < 100 || b.Price > 100_000_000 {
			t.Fatalf("event %d: price %d outside [1 $, 1 M$] in cents", n, b.Price)
		}
		logPrice += math.Log10(float64(b.Price) / 100)
		switch b.Channel {
		case "Google", "Facebook", "Baidu", "Apple":
			hotChannel++
			hot[b.Channel]++
		default:
			if !strings.HasPrefix(b.Channel, "channel-") {
				t.Fatalf("event %d: channel %q", n, b.Channel)
			}
		}
		if !urlRE.MatchString(b.URL) {
			t.Fatalf("event %d: url %q", n, b.URL)
		}
		if b.DateTime != g.Timestamp(n) {
			t.Fatalf("event %d: date_time %d, want %d", n, b.DateTime, g.Timestamp(n))
		}
		size += float64(8 + 8 + 8 + 8 + len(b.Extra))
	}
	f := float64(bids)
	// Hot with probability 1/2 (1 - 1/hot ratio 2), plus the random picks that hit it.
	within(t, "share of bids on the hot auction", float64(hotAuction)/f, 0.49, 0.52)
	within(t, "share of bids by the hot bidder", float64(hotBidder)/f, 0.74, 0.76)
	within(t, "share of bids through the 4 hot channels", float64(hotChannel)/f, 0.49, 0.51)
	for c, k := range hot {
		within(t, "share of hot channel "+c, float64(k)/f, 0.12, 0.13)
	}
	within(t, "mean log10(price in $) (uniform over [0, 6))", logPrice/f, 2.97, 3.03)
	within(t, "mean idealized bid size (bytes)", size/f, 99, 101)
}

func TestNexmarkPersonAndAuctionFields(t *testing.T) {
	g := NewNexmarkGenerator(3, 10000, 1_000_000)
	emailRE := regexp.MustCompile(`^([a-z]([a-z ]*[a-z])?)?@([a-z]([a-z ]*[a-z])?)?\.com$`)
	cardRE := regexp.MustCompile(`^\d{4} \d{4} \d{4} \d{4}$`)
	states, cities := map[string]bool{}, map[string]bool{}
	var persons, auctions, hotSeller int
	var pSize, aSize, length float64
	cats := map[int64]int{}
	for n := int64(0); n < 1_000_000; n++ {
		switch NexmarkKindOf(n) {
		case NexmarkPerson:
			p := g.Person(n)
			persons++
			if !emailRE.MatchString(p.EmailAddress) {
				t.Fatalf("event %d: email %q", n, p.EmailAddress)
			}
			if !cardRE.MatchString(p.CreditCard) {
				t.Fatalf("event %d: credit card %q", n, p.CreditCard)
			}
			if f := strings.Fields(p.Name); len(f) != 2 {
				t.Fatalf("event %d: name %q", n, p.Name)
			}
			states[p.State], cities[p.City] = true, true
			pSize += float64(8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra))
		case NexmarkAuction:
			a := g.Auction(n)
			auctions++
			cats[a.Category]++
			if a.Reserve <= a.InitialBid || a.Expires <= a.DateTime || a.DateTime != g.Timestamp(n) {
				t.Fatalf("event %d: auction %+v", n, a)
			}
			if a.Seller == lastPerson(n)/100*100+1000 {
				hotSeller++
			}
			if a.Seller < 1000 || a.Seller > lastPerson(n)+10+1000 {
				t.Fatalf("event %d: seller %d not a person so far", n, a.Seller)
			}
			if len(a.ItemName) > 19 || len(a.Description) > 99 || strings.TrimSpace(a.ItemName) != a.ItemName {
				t.Fatalf("event %d: item %q description %q", n, a.ItemName, a.Description)
			}
			length += float64(a.Expires - a.DateTime)
			aSize += float64(8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra))
		}
	}
	var st, ci []string
	for s := range states {
		st = append(st, s)
	}
	for c := range cities {
		ci = append(ci, c)
	}
	sort.Strings(st)
	if strings.Join(st, ",") != "AZ,CA,ID,OR,WA,WY" || len(ci) != 10 {
		t.Errorf("states %v, cities %v", st, ci)
	}
	within(t, "mean idealized person size", pSize/float64(persons), 195, 205)
	within(t, "mean idealized auction size", aSize/float64(auctions), 490, 510)
	within(t, "share of auctions by the hot seller", float64(hotSeller)/float64(auctions), 0.74, 0.77)
	for c := int64(10); c < 15; c++ {
		within(t, fmt.Sprintf("share of category %d", c), float64(cats[c])/float64(auctions), 0.19, 0.21)
	}
	if len(cats) != 5 {
		t.Errorf("categories %v, want 10 to 14", cats)
	}
	// At 10,000 events/s, 100 auctions take 1666 events = 166.6 ms: lengths average that.
	within(t, "mean auction length (ms)", length/float64(auctions), 160, 174)
}

func TestNexmarkTimestamps(t *testing.T) {
	g := NewNexmarkGenerator(0, 10_000_000, 5)
	for _, c := range []struct{ n, want int64 }{{0, 5}, {9_999, 5}, {10_000, 6}, {10_000_000, 1005}, {1 << 50, 5 + (1<<50)/10_000}} {
		if got := g.Timestamp(c.n); got != c.want {
			t.Errorf("Timestamp(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// readAllRows reads every split of a bounded source through OpenRows and returns the rows
// by event number.
func readAllRows(t *testing.T, s *NexmarkSource) map[int64]sql.Row {
	t.Helper()
	ctx := context.Background()
	out := map[int64]sql.Row{}
	splits, _ := s.Splits(ctx)
	for k, sp := range splits {
		r, err := s.OpenRows(ctx, sp, 0)
		if err != nil {
			t.Fatal(err)
		}
		last := int64(-1)
		for {
			b := &RowBatch{}
			err := r.ReadRows(ctx, b, 100)
			for i := 0; i < b.Len(); i++ {
				if b.Offsets[i] <= last {
					t.Fatalf("split %s: offset %d after %d", sp, b.Offsets[i], last)
				}
				last = b.Offsets[i]
				n := NexmarkEventNumber(b.Offsets[i], int64(k), int64(len(splits)))
				if _, dup := out[n]; dup {
					t.Fatalf("event %d read twice", n)
				}
				out[n] = append(sql.Row(nil), b.Row(i)...)
			}
			if errors.Is(err, ErrEndOfSplit) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
	return out
}

func TestNexmarkSplitsPartitionTheEvents(t *testing.T) {
	for _, table := range []string{"bid", "person", "auction"} {
		opts := map[string]string{"table": table, "events": "5000", "seed": "11"}
		one, err := OpenNexmarkSource(opts, nexSchema(table), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := readAllRows(t, one)
		kind := map[string]NexmarkKind{"bid": NexmarkBid, "person": NexmarkPerson, "auction": NexmarkAuction}[table]
		n := 0
		for e := int64(0); e < 5000; e++ {
			if NexmarkKindOf(e) == kind {
				n++
				if _, ok := want[e]; !ok {
					t.Fatalf("%s: event %d missing", table, e)
				}
			}
		}
		if len(want) != n {
			t.Fatalf("%s: %d rows, want %d", table, len(want), n)
		}
		for _, k := range []int{2, 3, 7} {
			o := map[string]string{"table": table, "events": "5000", "seed": "11", "splits": fmt.Sprint(k)}
			s, err := OpenNexmarkSource(o, nexSchema(table), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := readAllRows(t, s)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s with %d splits: the union of the splits differs from one split", table, k)
			}
			// Every split has rows of every table (whole epochs of 50 events per split).
			for sp := int64(0); sp < int64(k); sp++ {
				if countSplit(got, sp, int64(k)) == 0 {
					t.Fatalf("%s with %d splits: split %d has no rows", table, k, sp)
				}
			}
		}
	}
}

func TestNexmarkDeterministicPerSeed(t *testing.T) {
	read := func(seed string) map[int64]sql.Row {
		s, err := OpenNexmarkSource(map[string]string{"table": "bid", "events": "2000", "seed": seed}, nexBidSchema, nil)
		if err != nil {
			t.Fatal(err)
		}
		return readAllRows(t, s)
	}
	a, b, c := read("1"), read("1"), read("2")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different events")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same events")
	}
}

// The message paths (event-number bodies the nexmark format decodes, and JSON bodies)
// decode to exactly the rows of the row path, with the same offsets, whether a job reads
// every column or some.
func TestNexmarkMessagesDecodeToTheRows(t *testing.T) {
	ctx := context.Background()
	for _, format := range []string{"nexmark", "json"} {
		for _, table := range []string{"bid", "person", "auction"} {
			for _, columns := range [][]int{nil, {5, 0, 2}} {
				schema := nexSchema(table)
				opts := map[string]string{"table": table, "events": "3000", "splits": "2"}
				if format == "json" {
					opts["format"] = "json"
				}
				s, err := OpenNexmarkSource(opts, schema, columns)
				if err != nil {
					t.Fatal(err)
				}
				want := readAllRows(t, s)
				f, err := NewFormat(format, schema)
				if err != nil {
					t.Fatal(err)
				}
				got := map[int64]sql.Row{}
				for k, sp := range []string{"0", "1"} {
					r, err := s.Open(ctx, sp, 0)
					if err != nil {
						t.Fatal(err)
					}
					var kept []Message
					for {
						msgs, err := r.Read(ctx, nil, 64)
						kept = append(kept, msgs...)
						if errors.Is(err, ErrEndOfSplit) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					r.Close()
					// Bodies stay valid after later reads.
					for _, m := range kept {
						if m.Split != sp {
							t.Fatalf("message of split %s says split %q", sp, m.Split)
						}
						full, err := f.Decode(m.Body, nil)
						if err != nil {
							t.Fatalf("%s %s: body %q: %v", format, table, m.Body, err)
						}
						row := full
						if columns != nil {
							row = nil
							for i, v := range full {
								if !slices.Contains(columns, i) && v.K != sql.KindNull {
									t.Fatalf("%s %s: column %d not read but decoded as %v", format, table, i, v)
								}
							}
							for _, c := range columns {
								row = append(row, full[c])
							}
						}
						got[NexmarkEventNumber(m.Offset, int64(k), 2)] = row
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %s columns %v: decoded messages differ from the rows", format, table, columns)
				}
			}
		}
	}
}

// The nexmark format refuses what is not a nexmark body with an error, never a panic, and
// cannot write rows.
func TestNexmarkFormatErrors(t *testing.T) {
	f, err := NewFormat("nexmark", nexBidSchema)
	if err != nil {
		t.Fatal(err)
	}
	good := appendNexmarkBody(nil, ptr(nexmarkBodyHeader(NexmarkOptions{Table: NexmarkBid, EventRate: 10, Seed: 1}, 0x7f)), 4, 0)
	if _, err := f.Decode(good, nil); err != nil {
		t.Fatal(err)
	}
	bad := func(mut func(b []byte) []byte, want string) {
		t.Helper()
		b := mut(append([]byte(nil), good...))
		var de *DecodeError
		if _, err := f.Decode(b, nil); !errors.As(err, &de) || !strings.Contains(err.Error(), want) {
			t.Errorf("body %q: error %v, want a DecodeError containing %q", b, err, want)
		}
	}
	bad(func(b []byte) []byte { return b[:49] }, "49 bytes")
	bad(func(b []byte) []byte { b[0] = '{'; return b }, "starting with 'N'")
	bad(func(b []byte) []byte { b[1] = 9; return b }, "table 9")
	bad(func(b []byte) []byte { b[10], b[11] = 0, 0; return b }, "event rate 0")
	bad(func(b []byte) []byte { b[26] = 0xff; return b }, "column mask 0xff")
	bad(func(b []byte) []byte { b[34] = 0; return b }, "event number 0 is not a bid")
	bad(func(b []byte) []byte { b[41] = 0x80; return b }, "is not a bid")
	pf, _ := NewFormat("nexmark", sql.Schema{{Name: "nick", Type: sql.TypeVarchar}})
	one := appendNexmarkBody(nil, ptr(nexmarkBodyHeader(NexmarkOptions{Table: NexmarkBid, EventRate: 10}, 1)), 4, 0)
	if _, err := pf.Decode(one, nil); err == nil || !strings.Contains(err.Error(), "column nick is not a field of the bid table") {
		t.Errorf("a schema that is not the table's: %v", err)
	}
	if _, err := f.Encode(nil, sql.Row{sql.BigInt(1)}); !errors.Is(err, errNexmarkEncode) {
		t.Errorf("Encode: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func FuzzDecodeNexmark(f *testing.F) {
	h := nexmarkBodyHeader(NexmarkOptions{Table: NexmarkBid, EventRate: DefaultNexmarkEventRate, BaseTime: DefaultNexmarkBaseTime}, 0x7f)
	f.Add(appendNexmarkBody(nil, &h, 5, 1))
	h = nexmarkBodyHeader(NexmarkOptions{Table: NexmarkPerson, EventRate: 1, Seed: 9}, 0x3)
	f.Add(appendNexmarkBody(nil, &h, 50, 0))
	f.Add([]byte("N"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, schema := range []sql.Schema{nexBidSchema, nexPersonSchema, nexAuctionSchema} {
			fm, _ := NewFormat("nexmark", schema)
			row, err := fm.Decode(body, nil)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("error %v is not a DecodeError", err)
				}
				continue
			}
			if len(row) != len(schema) {
				t.Fatalf("%d values for %d columns", len(row), len(schema))
			}
		}
	})
}

func TestNexmarkResumeAtOffset(t *testing.T) {
	ctx := context.Background()
	s, err := OpenNexmarkSource(map[string]string{"table": "bid", "events": "4000", "splits": "3"}, nexBidSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := readAllRows(t, s)
	r, _ := s.OpenRows(ctx, "1", 0)
	b := &RowBatch{}
	if err := r.ReadRows(ctx, b, 50); err != nil {
		t.Fatal(err)
	}
	r.Close()
	next := b.Offsets[b.Len()-1] + 1
	r, _ = s.OpenRows(ctx, "1", next)
	rest := &RowBatch{}
	for {
		err := r.ReadRows(ctx, rest, 1000)
		if errors.Is(err, ErrEndOfSplit) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if rest.Offsets[0] < next {
		t.Fatalf("resumed at %d, want >= %d", rest.Offsets[0], next)
	}
	if b.Len()+rest.Len() != countSplit(all, 1, 3) {
		t.Fatalf("first read %d + resumed %d rows, want the split's %d", b.Len(), rest.Len(), countSplit(all, 1, 3))
	}
	for i := 0; i < rest.Len(); i++ {
		n := NexmarkEventNumber(rest.Offsets[i], 1, 3)
		if !reflect.DeepEqual(rest.Row(i), all[n]) {
			t.Fatalf("resumed row at offset %d differs", rest.Offsets[i])
		}
	}
}

func countSplit(rows map[int64]sql.Row, split, splits int64) int {
	n := 0
	for e := range rows {
		if e/50%splits == split {
			n++
		}
	}
	return n
}

func TestNexmarkUnbounded(t *testing.T) {
	ctx := context.Background()
	s, err := OpenNexmarkSource(map[string]string{"table": "person"}, nexPersonSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bounded() {
		t.Fatal("a source without events is bounded")
	}
	r, _ := s.OpenRows(ctx, "0", 0)
	defer r.Close()
	b := &RowBatch{}
	for i := 0; i < 20; i++ {
		if err := r.ReadRows(ctx, b, 500); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if b.Len() != 10_000 || b.Row(9999)[0].I != 1000+9999 {
		t.Fatalf("%d persons, last id %v", b.Len(), b.Row(b.Len() - 1)[0])
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.ReadRows(cctx, b, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}
}

// rate paces the generation: event n is not generated before start + n/rate. A fake clock
// that sleeping advances shows the waits without timing the test.
func TestNexmarkRatePacing(t *testing.T) {
	ctx := context.Background()
	s, err := OpenNexmarkSource(map[string]string{"table": "bid", "events": "200", "rate": "1000", "splits": "2"}, nexBidSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Options().EventRate != 1000 {
		t.Fatalf("event rate %d, want the rate 1000", s.Options().EventRate)
	}
	clock := time.Unix(1000, 0)
	var slept time.Duration
	s.now = func() time.Time { return clock }
	s.sleep = func(ctx context.Context, d time.Duration) error { slept += d; clock = clock.Add(d); return nil }
	r, _ := s.OpenRows(ctx, "1", 0)
	b := &RowBatch{}
	var batches int
	for {
		err := r.ReadRows(ctx, b, 1000)
		batches++
		if errors.Is(err, ErrEndOfSplit) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Split 1 holds the odd epochs, events 50-99 and 150-199. Its reader starts at event 50
	// (a person: the rate counts every event); its last bid, 199, is due 149 ms later.
	if slept != 149*time.Millisecond {
		t.Fatalf("slept %v, want 149ms", slept)
	}
	if b.Len() != 92 || batches < 90 {
		t.Fatalf("%d rows in %d batches: a paced reader must hand over each row when due", b.Len(), batches)
	}
	if got := b.Row(1)[5].I - b.Row(0)[5].I; got != 1 {
		t.Fatalf("date_time steps by %d ms, want 1 (1000 events/s)", got)
	}
}

func TestNexmarkColumnsByNameAndProjection(t *testing.T) {
	ctx := context.Background()
	schema := sql.Schema{{Name: "dateTime", Type: sql.TypeTimestamp}, {Name: "PRICE", Type: sql.TypeInt},
		{Name: "p_time", Type: sql.TypeTimestamp}, {Name: "bidder", Type: sql.TypeBigInt}}
	s, err := OpenNexmarkSource(map[string]string{"table": "bid", "events": "100", "base_time": "2026-11-30T00:00:00Z"}, schema, []int{3, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(42)
	s.now = func() time.Time { return now }
	r, _ := s.OpenRows(ctx, "0", 0)
	b := &RowBatch{}
	if err := r.ReadRows(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	g := s.Generator()
	row := b.Row(0)
	if b.Width != 3 || row[0] != sql.BigInt(g.BidBidder(4)) || row[1] != sql.Int(g.BidPrice(4)) || row[2] != sql.Timestamp(42) {
		t.Fatalf("row %v", row)
	}
	if ms, _ := sql.ParseTimestamp("2026-11-30T00:00:00Z"); g.Timestamp(0) != ms {
		t.Fatalf("base_time not applied: %d", g.Timestamp(0))
	}
}

func TestNexmarkOptionErrors(t *testing.T) {
	for _, c := range []struct {
		opts   map[string]string
		schema sql.Schema
		want   string
	}{
		{map[string]string{}, nexBidSchema, "table option is missing"},
		{map[string]string{"table": "bids"}, nexBidSchema, `table = "bids"`},
		{map[string]string{"table": "bid", "events": "-1"}, nexBidSchema, `events = "-1"`},
		{map[string]string{"table": "bid", "events": "1e6"}, nexBidSchema, `events = "1e6"`},
		{map[string]string{"table": "bid", "splits": "0"}, nexBidSchema, `splits = "0"`},
		{map[string]string{"table": "bid", "splits": "5000"}, nexBidSchema, `splits = "5000"`},
		{map[string]string{"table": "bid", "rate": "fast"}, nexBidSchema, `rate = "fast"`},
		{map[string]string{"table": "bid", "event_rate": "0"}, nexBidSchema, `event_rate = "0"`},
		{map[string]string{"table": "bid", "seed": "x"}, nexBidSchema, `seed = "x"`},
		{map[string]string{"table": "bid", "base_time": "yesterday"}, nexBidSchema, `base_time = "yesterday"`},
		{map[string]string{"table": "person"}, nexBidSchema, "column auction is not a field of the person table"},
		{map[string]string{"table": "bid"}, sql.Schema{{Name: "price", Type: sql.TypeVarchar}}, "column price is VARCHAR but the bid field price is BIGINT"},
		{map[string]string{"table": "bid"}, sql.Schema{{Name: "date_time", Type: sql.TypeBigInt}}, "column date_time is BIGINT"},
	} {
		err := CheckNexmarkStream(c.opts, c.schema)
		if err == nil || !errors.Is(err, ErrNexmark) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.opts, err, c.want)
		}
	}
	s, err := OpenNexmarkSource(map[string]string{"table": "bid", "splits": "2"}, nexBidSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []string{"2", "-1", "01", "x"} {
		if _, err := s.Open(context.Background(), sp, 0); err == nil || !strings.Contains(err.Error(), "no split") {
			t.Errorf("split %q: %v", sp, err)
		}
	}
	if _, err := s.OpenRows(context.Background(), "0", -5); err == nil {
		t.Error("a negative offset was accepted")
	}
}

func FuzzNexmarkOptions(f *testing.F) {
	f.Add("bid", "10000000", "0", "", "1", "", "-3")
	f.Add("person", "0", "1000", "500", "16", "2026-11-30T00:00:00Z", "18446744073709551615")
	f.Add("auction", "", "", "", "", "1767225600000", "")
	f.Fuzz(func(t *testing.T, table, events, rate, eventRate, splits, base, seed string) {
		opts := map[string]string{"table": table}
		for k, v := range map[string]string{"events": events, "rate": rate, "event_rate": eventRate, "splits": splits, "base_time": base, "seed": seed} {
			if v != "" {
				opts[k] = v
			}
		}
		o, err := ParseNexmarkOptions(opts)
		if err != nil {
			if !errors.Is(err, ErrNexmark) {
				t.Fatalf("error %v does not wrap ErrNexmark", err)
			}
			return
		}
		if o.Events < 0 || o.Rate < 0 || o.EventRate <= 0 || o.Splits < 1 || o.Splits > MaxNexmarkSplits {
			t.Fatalf("options out of range: %+v", o)
		}
		s, err := NewNexmarkSource(o, nexSchema(strings.ToLower(table)), nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.OpenRows(context.Background(), "0", 0)
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return time.Unix(0, 0) }
		s.sleep = func(context.Context, time.Duration) error { return context.Canceled }
		b := &RowBatch{}
		if err := r.ReadRows(context.Background(), b, 3); err != nil && !errors.Is(err, ErrEndOfSplit) && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	})
}

func BenchmarkNexmarkBidRows(b *testing.B) {
	s, err := OpenNexmarkSource(map[string]string{"table": "bid"}, nexBidSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	r, _ := s.OpenRows(context.Background(), "0", 0)
	batch := &RowBatch{}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch.Len() {
		batch.Values, batch.Offsets = batch.Values[:0], batch.Offsets[:0]
		if err := r.ReadRows(context.Background(), batch, 512); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bids/s")
}

// BenchmarkNexmarkBidMessages is the default message path: event numbers, generated by
// the nexmark format's Decode.
func BenchmarkNexmarkBidMessages(b *testing.B) {
	s, err := OpenNexmarkSource(map[string]string{"table": "bid"}, nexBidSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := NewFormat("nexmark", nexBidSchema)
	r, _ := s.Open(context.Background(), "0", 0)
	var msgs []Message
	row := make(sql.Row, 0, len(nexBidSchema))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(msgs) {
		msgs, err = r.Read(context.Background(), msgs[:0], 512)
		if err != nil {
			b.Fatal(err)
		}
		for i := range msgs {
			if row, err = f.Decode(msgs[i].Body, row[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bids/s")
}

// BenchmarkNexmarkBidJSON is the JSON message path: generate, encode to JSON, decode.
func BenchmarkNexmarkBidJSON(b *testing.B) {
	s, err := OpenNexmarkSource(map[string]string{"table": "bid", "format": "json"}, nexBidSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := NewFormat("json", nexBidSchema)
	r, _ := s.Open(context.Background(), "0", 0)
	var msgs []Message
	row := make(sql.Row, 0, len(nexBidSchema))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(msgs) {
		msgs, err = r.Read(context.Background(), msgs[:0], 512)
		if err != nil {
			b.Fatal(err)
		}
		for i := range msgs {
			if row, err = f.Decode(msgs[i].Body, row[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bids/s")
}

// The message path writes strings without escaping: every string the generator makes must
// be printable ASCII without '"' or '\'.
func TestNexmarkStringsNeedNoEscaping(t *testing.T) {
	NewNexmarkGenerator(0, 1, 0)
	check := func(what, s string) {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				t.Fatalf("%s holds %q at %d", what, c, i)
			}
		}
	}
	check("the padding pool", nexmarkExtraPool)
	check("the text pool", nexmarkTextPool)
	for _, c := range nexmarkChannelTable {
		check("channel", c.channel)
		check("url", c.url)
	}
	for i := range nexmarkHotURLs {
		check("hot channel", nexmarkHotChannels[i])
		check("hot url", nexmarkHotURLs[i])
	}
	for _, l := range [][]string{nexmarkPersonNames, nexmarkCities, nexmarkStates} {
		for _, s := range l {
			check("name, city or state", s)
		}
	}
	// Emails and credit cards are made of the text pool, digits, "@", ".com" and spaces.
	g := NewNexmarkGenerator(0, 1000, 0)
	for n := int64(0); n < 5000; n += 50 {
		p := g.Person(n)
		check("email", p.EmailAddress)
		check("credit card", p.CreditCard)
	}
}

// nextPrice's table and series agree with round(100 * 10^(6u)) within a cent.
func TestNexmarkPriceMatchesPow(t *testing.T) {
	for s := uint64(0); s < 200_000; s++ {
		r := nexRand{s: s * 7919}
		p := nextPrice(&r)
		r = nexRand{s: s * 7919}
		x := r.next()
		u := float64(x>>11) / (1 << 53)
		want := math.Round(math.Pow(10, u*6) * 100)
		if math.Abs(float64(p)-want) > 1 {
			t.Fatalf("u=%v: price %d, want %v", u, p, want)
		}
	}
}

// BenchmarkNexmarkAllEvents generates every event of the sequence whole (persons, auctions
// and bids, every field), as a source of all three types would: one op is one event.
func BenchmarkNexmarkAllEvents(b *testing.B) {
	g := NewNexmarkGenerator(0, DefaultNexmarkEventRate, DefaultNexmarkBaseTime)
	var sink int
	b.ReportAllocs()
	b.ResetTimer()
	for n := int64(0); n < int64(b.N); n++ {
		switch NexmarkKindOf(n) {
		case NexmarkPerson:
			sink += len(g.Person(n).Extra)
		case NexmarkAuction:
			sink += len(g.Auction(n).Extra)
		default:
			sink += len(g.Bid(n).Extra)
		}
	}
	if sink == 0 {
		b.Fatal("nothing generated")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
