package nexmark

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Each query's result over a small bounded run is checked row for row against the same
// result computed by a plain Go loop over the generator's events.

const testEvents = 20_000

type bidEvent struct {
	n int64
	connectors.NexmarkBidEvent
}

// testBids are the bids of cfg's event sequence, computed without the runtime.
func testBids(cfg Config) []bidEvent {
	cfg.defaults()
	base := cfg.BaseTime
	if base == 0 {
		base = connectors.DefaultNexmarkBaseTime
	}
	g := connectors.NewNexmarkGenerator(cfg.Seed, cfg.EventRate, base)
	var out []bidEvent
	for n := int64(0); n < cfg.Events; n++ {
		if connectors.NexmarkKindOf(n) == connectors.NexmarkBid {
			out = append(out, bidEvent{n, g.Bid(n)})
		}
	}
	return out
}

// runQuery runs the named query and returns its rows rendered as text, in arrival order.
func runQuery(t *testing.T, name string, cfg Config) ([]string, Result) {
	t.Helper()
	qs, err := Select(name)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(qs[0], cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// An updating query's rows end with the change column: an insert is rendered without
	// it, a delete as "DELETE " and the row.
	updating := plan.Stages[len(plan.Stages)-1].Sink.Changes != planner.AppendOnly
	var rows []string
	cfg.OnRow = func(r sql.Row) error {
		switch {
		case !updating:
			rows = append(rows, render(r...))
		case sql.IsDelete(r[len(r)-1]):
			rows = append(rows, "DELETE "+render(r[:len(r)-1]...))
		default:
			rows = append(rows, render(r[:len(r)-1]...))
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, qs[0], cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Late != 0 || res.Bad != 0 {
		t.Fatalf("%s: %d late and %d bad rows", name, res.Late, res.Bad)
	}
	if res.RowsOut != int64(len(rows)) {
		t.Fatalf("%s: %d rows counted, %d seen", name, res.RowsOut, len(rows))
	}
	return rows, res
}

func render(vs ...sql.Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "|")
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = append([]string(nil), got...), append([]string(nil), want...)
	sort.Strings(got)
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatalf("%s: the reference computation has no rows: the test checks nothing", what)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d (sorted) is\n  %s\nwant\n  %s", what, i, got[i], want[i])
		}
	}
}

func bi(i int64) sql.Value       { return sql.BigInt(i) }
func ts(ms int64) sql.Value      { return sql.Timestamp(ms) }
func str(s string) sql.Value     { return sql.Varchar(s) }
func day(ms int64) string        { return time.UnixMilli(ms).UTC().Format("2006-01-02") }
func hourMinute(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04") }

func TestQueriesEmbedded(t *testing.T) {
	var names []string
	for _, q := range Queries() {
		names = append(names, q.Name)
	}
	if got := strings.Join(names, ","); got != "q0,q1,q2,q3,q4,q5,q6,q7,q8,q9,q10,q11,q12,q13,q14,q15,q16,q17,q18,q19,q20,q21,q22,q23" {
		t.Fatalf("queries %s", got)
	}
	if _, err := Select("q0,24"); err == nil || !strings.Contains(err.Error(), "no query q24") {
		t.Fatalf("Select of a missing query: %v", err)
	}
	if qs, err := Select("2, q11"); err != nil || len(qs) != 2 || qs[0].Name != "q2" || qs[1].Name != "q11" {
		t.Fatalf("Select(2, q11) = %v, %v", qs, err)
	}
}

// q0 runs through each way the source can hand events over: typed rows (the runtime's
// RowSource path), nexmark messages and JSON messages (the decoders).
func TestQ0PassThrough(t *testing.T) {
	for _, format := range []string{"rows", "nexmark", "json"} {
		t.Run(format, func(t *testing.T) {
			cfg := Config{Events: testEvents, Splits: 2, Format: format}
			got, res := runQuery(t, "q0", cfg)
			var want []string
			for _, b := range testBids(cfg) {
				want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str(b.Extra)))
			}
			sameRows(t, "q0", got, want)
			if res.RecordsIn != int64(len(want)) {
				t.Fatalf("q0 read %d rows, want %d bids", res.RecordsIn, len(want))
			}
		})
	}
}

func TestQ1Projection(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2}
	got, _ := runQuery(t, "q1", cfg)
	var want []string
	for _, b := range testBids(cfg) {
		want = append(want, render(bi(b.Auction), bi(b.Bidder), sql.Decimal(b.Price*908, 3), ts(b.DateTime), str(b.Extra)))
	}
	sameRows(t, "q1", got, want)
}

func TestQ2Filter(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2, Seed: 3}
	got, _ := runQuery(t, "q2", cfg)
	var want []string
	for _, b := range testBids(cfg) {
		if b.Auction%123 == 0 {
			want = append(want, render(bi(b.Auction), bi(b.Price)))
		}
	}
	sameRows(t, "q2", got, want)
}

func TestQ10Partitions(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2, EventRate: 1, BaseTime: 1_767_301_200_000} // 2026-01-01T21:00Z
	got, _ := runQuery(t, "q10", cfg)
	var want []string
	for _, b := range testBids(cfg) {
		want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str(b.Extra),
			str(day(b.DateTime)), str(hourMinute(b.DateTime))))
	}
	sameRows(t, "q10", got, want)
}

// q11: a bidder's session is a maximal run of bids at most 10 s apart (sessions that touch
// are one: docs/sql.md, "Windows"); it starts at its first bid and ends 10 s after its last.
func TestQ11Sessions(t *testing.T) {
	for _, st := range []string{"memory", "rocksdb"} {
		t.Run(st, func(t *testing.T) {
			// 200 events per second: the 20,000 events span 100 s, so users have several sessions.
			cfg := Config{Events: testEvents, Splits: 2, EventRate: 200, State: st, CheckpointInterval: 10 * time.Millisecond}
			got, res := runQuery(t, "q11", cfg)
			// Over RocksDB the run reports the batches it wrote (at least one per checkpoint
			// taken) and RocksDB's memory (the memtables hold what they wrote).
			if b := res.Batches; st == "rocksdb" && (b.Count < res.Checkpoints || b.MaxOps == 0 || b.TotalBytes < b.MaxBytes ||
				res.Rocks.Memtables == 0) || st == "memory" && (b.Count != 0 || res.Rocks.Total() != 0) {
				t.Fatalf("%s: %d checkpoints, batches %+v, RocksDB memory %+v", st, res.Checkpoints, b, res.Rocks)
			}
			times := map[int64][]int64{}
			for _, b := range testBids(cfg) {
				times[b.Bidder] = append(times[b.Bidder], b.DateTime)
			}
			const gap = 10_000
			var want []string
			sessions := 0
			for bidder, tt := range times {
				sort.Slice(tt, func(i, j int) bool { return tt[i] < tt[j] })
				start, n := tt[0], 1
				for i := 1; i <= len(tt); i++ {
					if i == len(tt) || tt[i]-tt[i-1] > gap {
						want = append(want, render(bi(bidder), bi(int64(n)), ts(start), ts(tt[i-1]+gap)))
						sessions++
						if i < len(tt) {
							start, n = tt[i], 0
						}
					}
					n++
				}
			}
			if sessions <= len(times) {
				t.Fatalf("%d sessions of %d bidders: no bidder has two sessions, the test is too weak", sessions, len(times))
			}
			sameRows(t, "q11", got, want)
		})
	}
}

// q12 windows in processing time, so its rows depend on the speed of the run: every
// bid is counted once, in an aligned 10-second window, and no (bidder, window) repeats.
func TestQ12ProcessingTime(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2}
	got, _ := runQuery(t, "q12", cfg)
	want := map[string]int64{}
	for _, b := range testBids(cfg) {
		want[bi(b.Bidder).String()]++
	}
	have := map[string]int64{}
	seen := map[string]bool{}
	for _, row := range got {
		f := strings.Split(row, "|")
		var count int64
		fmt.Sscan(f[1], &count)
		start, ok1 := sql.ParseTimestamp(f[2])
		end, ok2 := sql.ParseTimestamp(f[3])
		if !ok1 || !ok2 || end-start != 10_000 || start%10_000 != 0 {
			t.Fatalf("q12 row %s: not an aligned 10 s window", row)
		}
		k := f[0] + "|" + f[2]
		if seen[k] {
			t.Fatalf("q12: bidder %s has two rows for window %s", f[0], f[2])
		}
		seen[k] = true
		have[f[0]] += count
	}
	if len(have) != len(want) {
		t.Fatalf("q12: %d bidders, want %d", len(have), len(want))
	}
	for b, n := range want {
		if have[b] != n {
			t.Fatalf("q12: bidder %s counted %d bids, want %d", b, have[b], n)
		}
	}
}

// q14: bids between 1,101,322 and 55,066,079 cents converted, with the time of day and
// the number of 'c' in extra.
// q13 joins every bid with the side input's row of its auction modulo 10,000: with the
// generated side input (each key's value its decimal text) every bid has one; with a side
// input of some keys only, the INNER join drops the bids of the others, and a key on two
// lines takes the last.
func TestQ13SideInput(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2}
	got, _ := runQuery(t, "q13", cfg)
	var want []string
	for _, b := range testBids(cfg) {
		want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str(strconv.FormatInt(b.Auction%10_000, 10))))
	}
	sameRows(t, "q13", got, want)

	// A side input of the keys divisible by 3, each with a value of its own; key 3 twice.
	var lines []string
	for k := int64(0); k < SideInputRows; k += 3 {
		lines = append(lines, fmt.Sprintf("%d,v%d", k, k*7))
	}
	lines = append(lines, "3,last")
	cfg.SideInputPath = filepath.Join(t.TempDir(), "side.csv")
	if err := os.WriteFile(cfg.SideInputPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ = runQuery(t, "q13", cfg)
	want, dropped := want[:0], 0
	for _, b := range testBids(cfg) {
		k := b.Auction % 10_000
		switch {
		case k == 3:
			want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str("last")))
		case k%3 == 0:
			want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str(fmt.Sprintf("v%d", k*7))))
		default:
			dropped++
		}
	}
	if dropped == 0 || len(want) == 0 {
		t.Fatalf("q13 with a partial side input: %d bids kept, %d dropped: the case tests little", len(want), dropped)
	}
	sameRows(t, "q13 with a partial side input", got, want)
}

func TestQ14(t *testing.T) {
	// One event per second from 05:00: the bids span night, other and day time.
	cfg := Config{Events: testEvents, Splits: 2, EventRate: 1, BaseTime: 1_767_243_600_000}
	got, _ := runQuery(t, "q14", cfg)
	var want []string
	kinds := map[string]bool{}
	for _, b := range testBids(cfg) {
		p := b.Price * 908 // 0.908 * price, scale 3
		if p <= 1_000_000_000 || p >= 50_000_000_000 {
			continue
		}
		h := time.UnixMilli(b.DateTime).UTC().Hour()
		kind := "otherTime"
		switch {
		case h >= 8 && h <= 18:
			kind = "dayTime"
		case h <= 6 || h >= 20:
			kind = "nightTime"
		}
		kinds[kind] = true
		want = append(want, render(bi(b.Auction), bi(b.Bidder), sql.Decimal(p, 3), str(kind), ts(b.DateTime), str(b.Extra),
			bi(int64(strings.Count(b.Extra, "c")))))
	}
	if len(kinds) != 3 {
		t.Fatalf("the bids have times of day %v: the test does not cover all three", kinds)
	}
	sameRows(t, "q14", got, want)
}

// rankOf is the price range of q15-q17: 1 below 10,000, 2 below 1,000,000, else 3.
func rankOf(price int64) int {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 3
}

// dayStats are the counters of q15 and q16 for one group.
type dayStats struct {
	bids     [4]int64 // [0] all, [1..3] by rank
	bidders  [4]map[int64]bool
	auctions [4]map[int64]bool
	minute   string
}

func (s *dayStats) add(b bidEvent) {
	if s.bidders[0] == nil {
		for i := range s.bidders {
			s.bidders[i], s.auctions[i] = map[int64]bool{}, map[int64]bool{}
		}
	}
	for _, i := range []int{0, rankOf(b.Price)} {
		s.bids[i]++
		s.bidders[i][b.Bidder] = true
		s.auctions[i][b.Auction] = true
	}
	if m := hourMinute(b.DateTime); m > s.minute {
		s.minute = m
	}
}

func (s *dayStats) values() []sql.Value {
	var v []sql.Value
	for i := 0; i < 4; i++ {
		v = append(v, bi(s.bids[i]))
	}
	for i := 0; i < 4; i++ {
		v = append(v, bi(int64(len(s.bidders[i]))))
	}
	for i := 0; i < 4; i++ {
		v = append(v, bi(int64(len(s.auctions[i]))))
	}
	return v
}

// lastPerKey checks that the rows of a changelog (at most one updated row per key and
// input batch, at least one per key) hold between 1 and counts[key] rows per key and fewer
// rows than input rows in all (the rows of a batch that change a key make one change), and
// returns the last row of each key.
func lastPerKey(t *testing.T, what string, rows []string, keyCols int, counts map[string]int) []string {
	t.Helper()
	last, n := map[string]string{}, map[string]int{}
	for _, r := range rows {
		f := strings.SplitN(r, "|", keyCols+1)
		k := strings.Join(f[:keyCols], "|")
		last[k] = r
		n[k]++
	}
	in := 0
	for k, c := range counts {
		if n[k] < 1 || n[k] > c {
			t.Fatalf("%s: key %s has %d updates, want 1 to one per bid (%d)", what, k, n[k], c)
		}
		in += c
	}
	if len(rows) >= in {
		t.Fatalf("%s: %d updates for %d bids: the batches fold nothing", what, len(rows), in)
	}
	if len(n) != len(counts) {
		t.Fatalf("%s: %d keys, want %d", what, len(n), len(counts))
	}
	out := make([]string, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	return out
}

// The day queries run at one event per second from 21:00, so the 20,000 events span
// midnight. "rocksdb-cache" is RocksDB state with a cache of 16 groups per aggregation, so
// that groups leave memory and are read back all along (exec/agg_cache.go).
func dayConfig(st string) Config {
	c := Config{Events: testEvents, Splits: 2, EventRate: 1, BaseTime: 1_767_301_200_000, State: st, CheckpointInterval: 10 * time.Millisecond}
	if st == "rocksdb-cache" {
		c.State, c.AggCacheGroups = "rocksdb", 16
	}
	return c
}

var dayStates = []string{"memory", "rocksdb", "rocksdb-cache"}

func TestQ15DailyStats(t *testing.T) {
	for _, st := range dayStates {
		t.Run(st, func(t *testing.T) {
			cfg := dayConfig(st)
			got, _ := runQuery(t, "q15", cfg)
			stats, counts := map[string]*dayStats{}, map[string]int{}
			for _, b := range testBids(cfg) {
				d := day(b.DateTime)
				if stats[d] == nil {
					stats[d] = &dayStats{}
				}
				stats[d].add(b)
				counts[d]++
			}
			if len(stats) < 2 {
				t.Fatal("the run does not span two days")
			}
			var want []string
			for d, s := range stats {
				want = append(want, render(append([]sql.Value{str(d)}, s.values()...)...))
			}
			sameRows(t, "q15", lastPerKey(t, "q15", got, 1, counts), want)
		})
	}
}

func TestQ16ChannelStats(t *testing.T) {
	for _, st := range dayStates {
		t.Run(st, func(t *testing.T) {
			cfg := dayConfig(st)
			got, _ := runQuery(t, "q16", cfg)
			type key struct{ channel, day string }
			stats, counts := map[key]*dayStats{}, map[string]int{}
			for _, b := range testBids(cfg) {
				k := key{b.Channel, day(b.DateTime)}
				if stats[k] == nil {
					stats[k] = &dayStats{}
				}
				stats[k].add(b)
				counts[k.channel+"|"+k.day]++
			}
			var want []string
			for k, s := range stats {
				want = append(want, render(append([]sql.Value{str(k.channel), str(k.day), str(s.minute)}, s.values()...)...))
			}
			sameRows(t, "q16", lastPerKey(t, "q16", got, 2, counts), want)
		})
	}
}

func TestQ17AuctionStats(t *testing.T) {
	for _, st := range dayStates {
		t.Run(st, func(t *testing.T) {
			cfg := dayConfig(st)
			got, _ := runQuery(t, "q17", cfg)
			type key struct {
				auction int64
				day     string
			}
			type agg struct{ n, r1, r2, r3, min, max, sum int64 }
			stats, counts := map[key]*agg{}, map[string]int{}
			for _, b := range testBids(cfg) {
				k := key{b.Auction, day(b.DateTime)}
				a := stats[k]
				if a == nil {
					a = &agg{min: b.Price, max: b.Price}
					stats[k] = a
				}
				a.n++
				switch rankOf(b.Price) {
				case 1:
					a.r1++
				case 2:
					a.r2++
				default:
					a.r3++
				}
				a.min, a.max, a.sum = min(a.min, b.Price), max(a.max, b.Price), a.sum+b.Price
				counts[bi(k.auction).String()+"|"+k.day]++
			}
			var want []string
			for k, a := range stats {
				want = append(want, render(bi(k.auction), str(k.day), bi(a.n), bi(a.r1), bi(a.r2), bi(a.r3),
					bi(a.min), bi(a.max), sql.Double(float64(a.sum)/float64(a.n)), bi(a.sum)))
			}
			sameRows(t, "q17", lastPerKey(t, "q17", got, 2, counts), want)
		})
	}
}

// channelID is q21's channel_id, found without a regular expression: the text after
// "channel_id=" at the start of the url or after a '&', up to the next '&'.
func channelID(url string) (string, bool) {
	for i := 0; i < len(url); i++ {
		if (i == 0 || url[i-1] == '&') && strings.HasPrefix(url[i:], "channel_id=") {
			rest := url[i+len("channel_id="):]
			if k := strings.IndexByte(rest, '&'); k >= 0 {
				rest = rest[:k]
			}
			return rest, true
		}
	}
	return "", false
}

func TestQ21ChannelID(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2}
	got, _ := runQuery(t, "q21", cfg)
	ids := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
	var want []string
	withURL := 0
	for _, b := range testBids(cfg) {
		id, ok := ids[strings.ToLower(b.Channel)]
		if !ok {
			if id, ok = channelID(b.URL); !ok {
				continue
			}
			withURL++
		}
		want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(id)))
	}
	if withURL == 0 || withURL == len(want) {
		t.Fatalf("%d of %d rows take their id from the url: the test does not cover both cases", withURL, len(want))
	}
	sameRows(t, "q21", got, want)
}

func TestQ22URLDirectories(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 2}
	got, _ := runQuery(t, "q22", cfg)
	var want []string
	for _, b := range testBids(cfg) {
		p := strings.Split(b.URL, "/")
		want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(p[3]), str(p[4]), str(p[5])))
	}
	sameRows(t, "q22", got, want)
}

// Through the broker the queries read the same events from topics, and give the same rows
// as in process: q0 (every bid), q11 (session windows, which fire when the bounded topics
// end).
func TestThroughBroker(t *testing.T) {
	for _, name := range []string{"q0", "q11"} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Events: testEvents / 4, Splits: 2}
			want, _ := runQuery(t, name, cfg)
			cfg.ThroughBroker = true
			started := false
			cfg.Started = func() { started = true }
			got, res := runQuery(t, name, cfg)
			if !started {
				t.Fatal("Started was not called")
			}
			sameRows(t, name+" through the broker", got, want)
			if res.RecordsIn == 0 {
				t.Fatal("the job read nothing")
			}
		})
	}
}
