package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Generated orders with comma-separated tags go through CROSS JOIN LATERAL
// string_to_table, CROSS JOIN UNNEST of a JSON array and LEFT JOIN LATERAL ... ON TRUE in
// jobs; each output is compared with the same split done in Go.
func TestBuiltinTableFunctionsInAJob(t *testing.T) {
	te := newTestEngine(t, false)
	rnd := rand.New(rand.NewPCG(3, 4))
	words := []string{"red", "green", "blue", "x y", "ü"}
	type order struct {
		id    int
		tags  string
		items []int
	}
	var orders []order
	var lines []string
	for i := 0; i < 300; i++ {
		o := order{id: i}
		var tags []string
		for k := rnd.IntN(4); k > 0; k-- {
			tags = append(tags, words[rnd.IntN(len(words))])
		}
		o.tags = strings.Join(tags, ",")
		for k := rnd.IntN(3); k > 0; k-- {
			o.items = append(o.items, rnd.IntN(100))
		}
		items, _ := json.Marshal(o.items)
		if o.items == nil {
			items = []byte("[]")
		}
		orders = append(orders, o)
		lines = append(lines, fmt.Sprintf(`{"id": %d, "tags": %q, "items": %s, "ts": %d}`, o.id, o.tags, items, 1000*i))
	}
	writeLines(t, te.path("orders.jsonl"), lines...)
	te.mustExec("CREATE STREAM orders (id BIGINT, tags VARCHAR, items JSON, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (path = '" + te.path("orders.jsonl") + "')")
	te.mustExec("CREATE STREAM tagged WITH (path = '" + te.path("tagged.jsonl") + "') AS " +
		"SELECT o.id, t.tag FROM orders AS o CROSS JOIN LATERAL string_to_table(o.tags, ',') AS t(tag) WHERE t.tag <> 'red'")
	te.mustExec("CREATE STREAM unnested WITH (path = '" + te.path("items.jsonl") + "') AS " +
		"SELECT id, CAST(item AS BIGINT) AS item, n FROM orders CROSS JOIN UNNEST(items) AS u(item) LEFT JOIN LATERAL generate_series(1, CAST(item AS INT) % 3) AS g(n) ON TRUE")
	te.waitJobs()
	for id, st := range te.jobStates() {
		if st != "FINISHED" {
			t.Fatalf("%s: %s", id, st)
		}
	}
	var wantTags, wantItems []string
	for _, o := range orders {
		if o.tags != "" {
			for _, tag := range strings.Split(o.tags, ",") {
				if tag != "red" {
					wantTags = append(wantTags, fmt.Sprintf("%d %s", o.id, tag))
				}
			}
		}
		for _, it := range o.items {
			if it%3 == 0 {
				wantItems = append(wantItems, fmt.Sprintf("%d %d <nil>", o.id, it))
			}
			for n := 1; n <= it%3; n++ {
				wantItems = append(wantItems, fmt.Sprintf("%d %d %d", o.id, it, n))
			}
		}
	}
	var gotTags, gotItems []string
	for _, l := range readLines(t, te.path("tagged.jsonl")) {
		var r struct {
			ID  int64
			Tag string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		gotTags = append(gotTags, fmt.Sprintf("%d %s", r.ID, r.Tag))
	}
	for _, l := range readLines(t, te.path("items.jsonl")) {
		var r struct {
			ID, Item int64
			N        *int64
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		n := "<nil>"
		if r.N != nil {
			n = strconv.FormatInt(*r.N, 10)
		}
		gotItems = append(gotItems, fmt.Sprintf("%d %d %s", r.ID, r.Item, n))
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"tags", gotTags, wantTags}, {"items", gotItems, wantItems}} {
		sort.Strings(c.got)
		sort.Strings(c.want)
		if strings.Join(c.got, "\n") != strings.Join(c.want, "\n") || len(c.want) < 100 {
			t.Errorf("%s: %d rows, want %d\ngot  %q\nwant %q", c.what, len(c.got), len(c.want), head(c.got), head(c.want))
		}
	}
}

func head(s []string) []string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}
