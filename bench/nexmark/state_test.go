package nexmark

import (
	"strings"
	"testing"
)

// The state queries (s*.sql) against a Go computation over the same events, and kept out
// of the suite's "all".
func TestStateQueries(t *testing.T) {
	all, err := Select("all")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all {
		if strings.HasPrefix(q.Name, "s") {
			t.Fatalf("%s is among the Nexmark queries", q.Name)
		}
	}
	cfg := Config{Events: testEvents, Splits: 2}
	ev := testEventsOf(cfg)

	// s1: per (bidder, auction) the count, highest and total price, folded from its upserts.
	type pair struct{ bidder, auction int64 }
	type acc struct{ n, top, total int64 }
	groups := map[pair]*acc{}
	for _, b := range ev.bids {
		a := groups[pair{b.Bidder, b.Auction}]
		if a == nil {
			a = &acc{top: b.Price}
			groups[pair{b.Bidder, b.Auction}] = a
		}
		a.n++
		a.total += b.Price
		a.top = max(a.top, b.Price)
	}
	var want []string
	for k, a := range groups {
		want = append(want, render(bi(k.bidder), bi(k.auction), bi(a.n), bi(a.top), bi(a.total)))
	}
	got, _ := runQuery(t, "s1", cfg)
	sameRows(t, "s1", foldUpserts(t, "s1", got, 2), want)

	// s2: every bid with its auction's seller and category.
	type auc struct{ seller, category int64 }
	auctions := map[int64]auc{}
	for _, a := range ev.auctions {
		auctions[a.ID] = auc{a.Seller, a.Category}
	}
	want = want[:0]
	for _, b := range ev.bids {
		if a, ok := auctions[b.Auction]; ok {
			want = append(want, render(bi(b.Auction), bi(b.Bidder), bi(b.Price), bi(a.seller), bi(a.category)))
		}
	}
	if len(want) == 0 {
		t.Fatal("no bid has its auction: the test covers nothing")
	}
	got, _ = runQuery(t, "s2", cfg)
	sameRows(t, "s2", got, want)
}
