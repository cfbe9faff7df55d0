package nexmark

import (
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
)

// The queries with joins, subqueries and Top-N, each checked row for row against a plain
// Go computation over the generator's events (no SQL, no runtime).

// events are the three kinds of cfg's event sequence, each in event order.
type events struct {
	persons  []connectors.NexmarkPersonEvent
	auctions []connectors.NexmarkAuctionEvent
	bids     []connectors.NexmarkBidEvent
}

func testEventsOf(cfg Config) events {
	cfg.defaults()
	base := cfg.BaseTime
	if base == 0 {
		base = connectors.DefaultNexmarkBaseTime
	}
	g := connectors.NewNexmarkGenerator(cfg.Seed, cfg.EventRate, base)
	var ev events
	for n := int64(0); n < cfg.Events; n++ {
		switch connectors.NexmarkKindOf(n) {
		case connectors.NexmarkPerson:
			ev.persons = append(ev.persons, g.Person(n))
		case connectors.NexmarkAuction:
			ev.auctions = append(ev.auctions, g.Auction(n))
		default:
			ev.bids = append(ev.bids, g.Bid(n))
		}
	}
	return ev
}

func (ev events) personByID() map[int64]connectors.NexmarkPersonEvent {
	m := make(map[int64]connectors.NexmarkPersonEvent, len(ev.persons))
	for _, p := range ev.persons {
		m[p.ID] = p
	}
	return m
}

// windowStart is the start of the tumbling window of size ms holding t (t >= 0).
func windowStart(t, size int64) int64 { return t / size * size }

// forStates runs a test with memory and RocksDB state, checkpointing often so that the
// join and Top-N state is written and read back while the query runs.
func forStates(t *testing.T, f func(t *testing.T, st string)) {
	for _, st := range []string{"memory", "rocksdb"} {
		t.Run(st, func(t *testing.T) { f(t, st) })
	}
}

// forCachedStates is forStates and "rocksdb-cache": RocksDB state with caches of 16
// groups, partitions or join keys (cached), so that they leave memory and are read back
// all along.
func forCachedStates(t *testing.T, f func(t *testing.T, cached func(Config) Config)) {
	for _, st := range dayStates {
		t.Run(st, func(t *testing.T) {
			f(t, func(c Config) Config {
				c.State = st
				if st == "rocksdb-cache" {
					c.State, c.AggCacheGroups, c.JoinCacheKeys, c.CheckpointInterval = "rocksdb", 16, 16, time.Millisecond
				}
				return c
			})
		})
	}
}

// q3: the auctions of category 10 joined with their seller when the seller is in OR, ID
// or CA. At 1,000 events per second the 200,000 events span 200 s of event time, more than
// the one-minute state TTL plus the watermark delay, so the join forgets rows while it
// runs: the result must still be the whole join (the TTL outlasts a person's activity).
func TestQ3LocalItemSuggestion(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 200_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		got, _ := runQuery(t, "q3", cfg)
		ev := testEventsOf(cfg)
		people := ev.personByID()
		var want []string
		for _, a := range ev.auctions {
			p, ok := people[a.Seller]
			if a.Category != 10 || !ok || p.State != "OR" && p.State != "ID" && p.State != "CA" {
				continue
			}
			want = append(want, render(str(p.Name), str(p.City), str(p.State), bi(a.ID)))
		}
		sameRows(t, "q3", got, want)
	})
}

// q20: the bids on auctions of category 10, with the auction's fields; some bids name an
// auction created after them (the join waits for it).
func TestQ20ExpandBidWithAuction(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 50_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		got, _ := runQuery(t, "q20", cfg)
		ev := testEventsOf(cfg)
		auctions := map[int64]connectors.NexmarkAuctionEvent{}
		for _, a := range ev.auctions {
			auctions[a.ID] = a
		}
		var want []string
		early := 0
		for _, b := range ev.bids {
			a, ok := auctions[b.Auction]
			if !ok || a.Category != 10 {
				continue
			}
			if b.DateTime < a.DateTime {
				early++
			}
			want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(b.URL), ts(b.DateTime), str(b.Extra),
				str(a.ItemName), str(a.Description), bi(a.InitialBid), bi(a.Reserve), ts(a.DateTime), ts(a.Expires), bi(a.Seller), bi(a.Category), str(a.Extra)))
		}
		if early == 0 {
			t.Fatal("no bid precedes its auction: the test does not cover the join's waiting side")
		}
		sameRows(t, "q20", got, want)
	})
}

// q18: the last bid of each (bidder, auction). With one split the bids arrive in event
// order, and a bid is emitted when it is later than its pair's last one (at the suite's
// 10 M events per second many bids share a millisecond: those of a pair after its first in
// that millisecond are not emitted).
func TestQ18LastBid(t *testing.T) {
	cfg := Config{Events: testEvents, Splits: 1, CheckpointInterval: 10 * time.Millisecond}
	got, _ := runQuery(t, "q18", cfg)
	type key struct{ bidder, auction int64 }
	last := map[key]int64{}
	var want []string
	skipped := 0
	for _, b := range testBids(cfg) {
		k := key{b.Bidder, b.Auction}
		if t0, ok := last[k]; ok && b.DateTime <= t0 {
			skipped++
			continue
		}
		last[k] = b.DateTime
		want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(b.URL), ts(b.DateTime), str(b.Extra)))
	}
	if skipped == 0 || len(last) == len(want) {
		t.Fatalf("%d bids not later than their pair's last, %d pairs of %d rows: the test does not cover both cases", skipped, len(last), len(want))
	}
	sameRows(t, "q18", got, want)
}

// q18 over two splits at one event per millisecond: arrival order across splits varies, but
// each (bidder, auction)'s latest emitted row is its last bid.
func TestQ18LastBidSplits(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: testEvents, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		got, _ := runQuery(t, "q18", cfg)
		type key struct{ bidder, auction int64 }
		lastBid := map[key]bidEvent{}
		for _, b := range testBids(cfg) {
			lastBid[key{b.Bidder, b.Auction}] = b
		}
		latest := map[string]string{} // "bidder|auction" -> the emitted row with the latest time
		for _, r := range got {
			f := strings.Split(r, "|")
			k := f[1] + "|" + f[0]
			if old, ok := latest[k]; !ok || strings.Split(old, "|")[5] < f[5] {
				latest[k] = r
			}
		}
		var want, have []string
		for _, b := range lastBid {
			want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(b.URL), ts(b.DateTime), str(b.Extra)))
		}
		for _, r := range latest {
			have = append(have, r)
		}
		if len(got) > len(testBids(cfg)) {
			t.Fatalf("q18 emitted %d rows for %d bids", len(got), len(testBids(cfg)))
		}
		sameRows(t, "q18", have, want)
	})
}

// q19: the ten highest bids of each auction over the whole stream, numbered, ties in price
// broken by time and bidder; its changes folded.
func TestQ19AuctionTop10(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: testEvents, Splits: 2, EventRate: 200, CheckpointInterval: 10 * time.Millisecond})
		rows, _ := runQuery(t, "q19", cfg)
		got := foldChanges(t, "q19", rows)
		parts := map[int64][]bidEvent{}
		for _, b := range testBids(cfg) {
			parts[b.Auction] = append(parts[b.Auction], b)
		}
		var want []string
		full := 0
		for _, bs := range parts {
			sort.SliceStable(bs, func(i, j int) bool {
				a, b := bs[i], bs[j]
				if a.Price != b.Price {
					return a.Price > b.Price
				}
				if a.DateTime != b.DateTime {
					return a.DateTime < b.DateTime
				}
				return a.Bidder < b.Bidder
			})
			if len(bs) > 10 {
				bs = bs[:10]
				full++
			}
			for i, b := range bs {
				want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), str(b.Channel), str(b.URL), ts(b.DateTime), str(b.Extra), bi(int64(i+1))))
			}
		}
		if full == 0 || full == len(parts) {
			t.Fatalf("%d of %d auctions have more than 10 bids: the test does not cover both cases", full, len(parts))
		}
		sameRows(t, "q19", got, want)
	})
}

// q5: per 10-second window sliding by 2 seconds, the auctions with the most bids (all of
// them when several tie).
func TestQ5HotItems(t *testing.T) {
	forStates(t, func(t *testing.T, st string) {
		// Ten events per second: the 20,000 events span 1,004 windows, and with this seed
		// two of them have two hottest auctions (a hot auction lasts ~1,667 events, so only
		// a window that holds a change of hot auction can tie).
		cfg := Config{Events: testEvents, Splits: 2, EventRate: 10, Seed: 2, State: st, CheckpointInterval: 10 * time.Millisecond}
		got, _ := runQuery(t, "q5", cfg)
		type key struct{ auction, window int64 }
		counts := map[key]int64{}
		top := map[int64]int64{}
		for _, b := range testBids(cfg) {
			// The windows holding t start at multiples of 2 s in (t - 10 s, t].
			for s := windowStart(b.DateTime, 2_000); s > b.DateTime-10_000; s -= 2_000 {
				k := key{b.Auction, s}
				counts[k]++
				top[s] = max(top[s], counts[k])
			}
		}
		var want []string
		ties := 0
		perWindow := map[int64]int{}
		for k, n := range counts {
			if n == top[k.window] {
				want = append(want, render(bi(k.auction), bi(n)))
				if perWindow[k.window]++; perWindow[k.window] == 2 {
					ties++
				}
			}
		}
		if len(top) < 100 || ties == 0 {
			t.Fatalf("%d windows, %d with a tie: the test is too weak", len(top), ties)
		}
		sameRows(t, "q5", got, want)
	})
}

// q7: the bids with the highest price of their 10-second window.
func TestQ7HighestBid(t *testing.T) {
	forStates(t, func(t *testing.T, st string) {
		cfg := Config{Events: testEvents, Splits: 2, EventRate: 200, State: st, CheckpointInterval: 10 * time.Millisecond}
		got, _ := runQuery(t, "q7", cfg)
		bids := testBids(cfg)
		maxPrice := map[int64]int64{}
		for _, b := range bids {
			w := windowStart(b.DateTime, 10_000)
			maxPrice[w] = max(maxPrice[w], b.Price)
		}
		var want []string
		for _, b := range bids {
			if b.Price == maxPrice[windowStart(b.DateTime, 10_000)] {
				want = append(want, render(bi(b.Auction), bi(b.Price), bi(b.Bidder), ts(b.DateTime), str(b.Extra)))
			}
		}
		if len(maxPrice) < 5 {
			t.Fatalf("%d windows: the test is too weak", len(maxPrice))
		}
		sameRows(t, "q7", got, want)
	})
}

// q8: the people who created an auction in the 10-second window they registered in.
func TestQ8MonitorNewUsers(t *testing.T) {
	forStates(t, func(t *testing.T, st string) {
		cfg := Config{Events: 100_000, Splits: 2, EventRate: 1000, State: st, CheckpointInterval: 10 * time.Millisecond}
		got, _ := runQuery(t, "q8", cfg)
		ev := testEventsOf(cfg)
		type key struct{ seller, window int64 }
		sold := map[key]bool{}
		for _, a := range ev.auctions {
			sold[key{a.Seller, windowStart(a.DateTime, 10_000)}] = true
		}
		var want []string
		for _, p := range ev.persons {
			w := windowStart(p.DateTime, 10_000)
			if sold[key{p.ID, w}] {
				want = append(want, render(bi(p.ID), str(p.Name), ts(w)))
			}
		}
		if len(want) >= len(ev.persons)/2 {
			t.Fatalf("%d of %d people sold in their first window: the test is too weak", len(want), len(ev.persons))
		}
		sameRows(t, "q8", got, want)
	})
}

// q23: every bid with its bidder and each auction the bidder sells: a join of a join.
func TestQ23MultiWayJoin(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 50_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		got, _ := runQuery(t, "q23", cfg)
		ev := testEventsOf(cfg)
		people := ev.personByID()
		bySeller := map[int64][]connectors.NexmarkAuctionEvent{}
		for _, a := range ev.auctions {
			bySeller[a.Seller] = append(bySeller[a.Seller], a)
		}
		var want []string
		for _, b := range ev.bids {
			p, ok := people[b.Bidder]
			if !ok {
				continue
			}
			for _, a := range bySeller[b.Bidder] {
				want = append(want, render(bi(b.Bidder), bi(b.Price), str(b.Channel), str(b.URL), str(b.Extra),
					bi(p.ID), str(p.Name), str(p.EmailAddress), str(p.CreditCard), str(p.City), str(p.State), str(p.Extra),
					str(a.ItemName), str(a.Description), bi(a.InitialBid), bi(a.Reserve), ts(a.DateTime), ts(a.Expires),
					bi(a.Seller), bi(a.Category), str(a.Extra)))
			}
		}
		sameRows(t, "q23", got, want)
	})
}

// A query file's SET state_ttl is the job's state TTL: q3 plans with it, without it plans
// the exact regular join (no TTL), and a value that is not a duration is an error naming
// it.
func TestQueryStateTTL(t *testing.T) {
	qs, err := Select("q3")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(qs[0], Config{})
	if err != nil {
		t.Fatal(err)
	}
	if text := planner.Explain(nil, plan); !strings.Contains(text, "mode=regular") || !strings.Contains(text, "state-ttl=INTERVAL '1' MINUTE") {
		t.Fatalf("q3's plan has no regular join with a one-minute TTL:\n%s", text)
	}
	without := Query{Name: "q3", SQL: strings.Replace(qs[0].SQL, "SET state_ttl = '1 minute';", "", 1)}
	exact, err := Plan(without, Config{})
	if err != nil {
		t.Fatalf("q3 without its TTL: %v", err)
	}
	if text := planner.Explain(nil, exact); !strings.Contains(text, "mode=regular") || strings.Contains(text, "state-ttl") {
		t.Fatalf("q3 without its TTL plans no exact regular join:\n%s", text)
	}
	bad := Query{Name: "q3", SQL: strings.Replace(qs[0].SQL, "'1 minute'", "'a while'", 1)}
	if _, err := Plan(bad, Config{}); err == nil || !strings.Contains(err.Error(), `"a while"`) {
		t.Fatalf("q3 with a bad TTL: %v", err)
	}
	other := Query{Name: "q3", SQL: "SET offset_reset = 'earliest'; " + qs[0].SQL}
	if _, err := Plan(other, Config{}); err == nil {
		t.Fatal("a SET of another setting is accepted")
	}
}

// foldChanges folds the rows of an updating query (runQuery's rendering: an insert as
// its row, a delete as "DELETE " and its row) into the multiset they end with, failing on
// the delete of a row not held.
func foldChanges(t *testing.T, what string, rows []string) []string {
	t.Helper()
	held := map[string]int{}
	deletes := 0
	for _, r := range rows {
		if d, ok := strings.CutPrefix(r, "DELETE "); ok {
			if held[d] == 0 {
				t.Fatalf("%s: the delete of a row not held: %s", what, d)
			}
			held[d]--
			deletes++
			continue
		}
		held[r]++
	}
	var out []string
	for r, n := range held {
		for i := 0; i < n; i++ {
			out = append(out, r)
		}
	}
	if deletes == 0 {
		t.Fatalf("%s: no row was taken back: the test does not cover the query's changes", what)
	}
	return out
}

// foldUpserts folds an upsert changelog keyed by its first keyCols columns: the last row
// of each key, unless its last change is a delete; it fails when no key changed twice.
func foldUpserts(t *testing.T, what string, rows []string, keyCols int) []string {
	t.Helper()
	last, n := map[string]string{}, map[string]int{}
	updated := false
	for _, r := range rows {
		d, del := strings.CutPrefix(r, "DELETE ")
		f := strings.SplitN(d, "|", keyCols+1)
		k := strings.Join(f[:keyCols], "|")
		n[k]++
		updated = updated || n[k] > 1
		if del {
			delete(last, k)
			continue
		}
		last[k] = d
	}
	if !updated {
		t.Fatalf("%s: no key changed: the test does not cover the query's changes", what)
	}
	var out []string
	for _, r := range last {
		out = append(out, r)
	}
	return out
}

// winners are each auction's highest bid made during its lifetime (ties: the earliest, then
// the first generated), by auction id.
func (ev events) winners() map[int64]connectors.NexmarkBidEvent {
	auctions := map[int64]connectors.NexmarkAuctionEvent{}
	for _, a := range ev.auctions {
		auctions[a.ID] = a
	}
	win := map[int64]connectors.NexmarkBidEvent{}
	for _, b := range ev.bids {
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		w, seen := win[a.ID]
		if !seen || b.Price > w.Price || b.Price == w.Price && b.DateTime < w.DateTime {
			win[a.ID] = b
		}
	}
	return win
}

// q4: the average winning price per category, its changes folded.
func TestQ4AveragePricePerCategory(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 50_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		rows, _ := runQuery(t, "q4", cfg)
		got := foldUpserts(t, "q4", rows, 1)
		ev := testEventsOf(cfg)
		cat := map[int64]int64{}
		for _, a := range ev.auctions {
			cat[a.ID] = a.Category
		}
		sum, n := map[int64]float64{}, map[int64]int64{}
		for id, b := range ev.winners() {
			sum[cat[id]] += float64(b.Price)
			n[cat[id]]++
		}
		var want []string
		for c := range n {
			want = append(want, render(bi(c))+"|"+strconvF(sum[c]/float64(n[c])))
		}
		// The averages are compared to 9 significant digits: a retracted sum may differ
		// from a fresh one in its last bits.
		for i, r := range got {
			k, v, _ := strings.Cut(r, "|")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("q4: row %s: %v", r, err)
			}
			got[i] = k + "|" + strconvF(f)
		}
		sameRows(t, "q4", got, want)
	})
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'g', 9, 64) }

// q9: each auction with its winning bid, its changes folded.
func TestQ9WinningBids(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 50_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		rows, _ := runQuery(t, "q9", cfg)
		got := foldChanges(t, "q9", rows)
		ev := testEventsOf(cfg)
		auctions := map[int64]connectors.NexmarkAuctionEvent{}
		for _, a := range ev.auctions {
			auctions[a.ID] = a
		}
		var want []string
		for id, b := range ev.winners() {
			a := auctions[id]
			want = append(want, render(bi(a.ID), str(a.ItemName), str(a.Description), bi(a.InitialBid), bi(a.Reserve), ts(a.DateTime), ts(a.Expires), bi(a.Seller), bi(a.Category), str(a.Extra),
				bi(b.Auction), bi(b.Bidder), bi(b.Price), ts(b.DateTime), str(b.Extra)))
		}
		sameRows(t, "q9", got, want)
	})
}

// q6: per seller, the average winning price of each auction and the seller's ten auctions
// before it (by the winning bid's time, then the auction id), its changes folded.
func TestQ6AverageSellingPriceBySeller(t *testing.T) {
	forCachedStates(t, func(t *testing.T, cached func(Config) Config) {
		cfg := cached(Config{Events: 50_000, Splits: 2, EventRate: 1000, CheckpointInterval: 10 * time.Millisecond})
		rows, _ := runQuery(t, "q6", cfg)
		got := foldChanges(t, "q6", rows)
		ev := testEventsOf(cfg)
		seller := map[int64]int64{}
		for _, a := range ev.auctions {
			seller[a.ID] = a.Seller
		}
		type won struct{ id, time, price int64 }
		by := map[int64][]won{}
		for id, b := range ev.winners() {
			by[seller[id]] = append(by[seller[id]], won{id, b.DateTime, b.Price})
		}
		var want []string
		for s, ws := range by {
			sort.Slice(ws, func(i, j int) bool {
				if ws[i].time != ws[j].time {
					return ws[i].time < ws[j].time
				}
				return ws[i].id < ws[j].id
			})
			for k := range ws {
				var sum, n int64
				for j := max(0, k-10); j <= k; j++ {
					sum += ws[j].price
					n++
				}
				want = append(want, render(bi(s))+"|"+strconvF(float64(sum)/float64(n)))
			}
		}
		for i, r := range got {
			k, v, _ := strings.Cut(r, "|")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("q6: row %s: %v", r, err)
			}
			got[i] = k + "|" + strconvF(f)
		}
		sameRows(t, "q6", got, want)
	})
}

// q5's join holds of the counts per auction only those at their window's running maximum:
// the other side is the MAX of the same counts (planner.JoinDominance through the
// residual num >= maxn), so the others cannot match.
func TestQ5JoinHoldsOnlyTopCounts(t *testing.T) {
	qs, err := Select("q5")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(qs[0], Config{Events: testEvents})
	if err != nil {
		t.Fatal(err)
	}
	var dom *planner.JoinDominance
	for _, st := range plan.Stages {
		for _, op := range st.Ops {
			if j, ok := op.Node.(*planner.JoinNode); ok {
				dom = j.Dominance
			}
		}
	}
	if dom == nil || dom.Key >= 0 || dom.Sign != 1 {
		t.Fatalf("q5's join keeps every count (dominance %+v)\n%s", dom, planner.Explain(nil, plan))
	}
}
