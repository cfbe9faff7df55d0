package exec

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// runOver runs plan over evs (split by the user's last digit's parity, as foldChanges)
// and returns the folded rows and the number of deletes among the changes.
func runOver(t *testing.T, plan *planner.Physical, evs []event4) (map[string]int, int) {
	t.Helper()
	src := newMemSource(true, 64, "0", "1")
	var parts [2][]event4
	for _, e := range evs {
		parts[int(e.user[len(e.user)-1])%2] = append(parts[int(e.user[len(e.user)-1])%2], e)
	}
	feedAll(src, "0", parts[0])
	feedAll(src, "1", parts[1])
	rows := map[string]int{}
	deletes := 0
	var bad []string
	env := testEnvFor(src, func(r sql.Row) error {
		k := fmt.Sprint(r[:len(r)-1])
		if sql.IsDelete(r[len(r)-1]) {
			deletes++
			if rows[k] == 0 {
				bad = append(bad, k)
			}
			if rows[k]--; rows[k] == 0 {
				delete(rows, k)
			}
			return nil
		}
		rows[k]++
		return nil
	})
	j, err := Start(context.Background(), "over", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d deletes of rows not held, first %s", len(bad), bad[0])
	}
	return rows, deletes
}

// Aggregates over the rows of a stream: in order, each row is one insert and no row is
// taken back; out of order, a row arriving before others takes back the rows after it in
// its frame. Both fold to the values over each user's rows in time order.
func TestOverRowsOfAStream(t *testing.T) {
	plan := planSQL(t, `SELECT user_id, amount,
  COUNT(n) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS c,
  MAX(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS m
  FROM orders`, planCatalog(), "over")
	if text := planner.Explain(nil, plan); !strings.Contains(text, "Over COUNT(n), MAX(amount)") || !strings.Contains(text, "changes=retract") {
		t.Fatalf("no window aggregate with a retract changelog:\n%s", text)
	}
	for _, disorder := range []int64{0, 150} {
		t.Run(fmt.Sprint("disorder=", disorder), func(t *testing.T) {
			// A user's times are distinct: one order in every frame.
			seen := map[string]bool{}
			var evs []event4
			for _, e := range genEvents(5, 3000, 20, disorder) {
				if k := fmt.Sprint(e.user, e.ts); !seen[k] {
					seen[k] = true
					evs = append(evs, e)
				}
			}
			by := map[string][]event4{}
			for _, e := range evs {
				by[e.user] = append(by[e.user], e)
			}
			want := map[string]int{}
			for u, es := range by {
				sort.Slice(es, func(i, j int) bool { return es[i].ts < es[j].ts })
				for k, e := range es {
					c, m := int64(0), e.amount
					for j := max(0, k-2); j <= k; j++ {
						if !es[j].nNull {
							c++
						}
						m = max(m, es[j].amount)
					}
					want[fmt.Sprint(sql.Row{sql.Varchar(u), sql.Double(e.amount), sql.BigInt(c), sql.Double(m)})]++
				}
			}
			got, deletes := runOver(t, plan, evs)
			if g, w := multisetText(got), multisetText(want); g != w {
				t.Fatalf("folded window aggregates differ:\n%s", diff(strings.Split(g, "\n"), strings.Split(w, "\n")))
			}
			switch {
			case disorder == 0 && deletes > 0:
				t.Fatalf("rows in order took back %d rows", deletes)
			case disorder > 0 && deletes == 0:
				t.Fatal("rows out of order took nothing back: the test does not cover retraction")
			}
		})
	}
}

// A stored row's key and count read back as written; anything else is errBadOver, never a
// crash.
func FuzzDecodeOverRow(f *testing.F) {
	key := appendOverRowKey(nil, "p\x00", sql.Row{sql.Varchar("u1"), sql.BigInt(7), sql.Null})
	f.Add(key, []byte{2})
	f.Add(key[:len(key)-1], []byte{1})
	f.Add([]byte{9, 1}, []byte{0})
	f.Fuzz(func(t *testing.T, key, v []byte) {
		part, row, cnt, err := decodeOverRow(key, v)
		if err != nil {
			if !errors.Is(err, errBadOver) {
				t.Fatalf("error %v does not wrap errBadOver", err)
			}
			return
		}
		if cnt == 0 || cnt > maxOverCopies {
			t.Fatalf("count %d", cnt)
		}
		if again := appendOverRowKey(nil, part, row); string(again) != string(key) {
			t.Fatalf("key %x decodes to a row that encodes as %x", key, again)
		}
	})
}
