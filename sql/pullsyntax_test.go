package sql

import (
	"testing"
)

// TestPostgresRowLimitSyntax: OFFSET without LIMIT, LIMIT ALL, OFFSET ... ROWS, FETCH
// FIRST|NEXT n ROW|ROWS ONLY, in either order, as PostgreSQL reads them.
func TestPostgresRowLimitSyntax(t *testing.T) {
	cat := newTestCatalog()
	for _, c := range []struct {
		text          string
		limit, offset int64
	}{
		{"SELECT user_id FROM user_counts ORDER BY user_id OFFSET 2", -1, 2},
		{"SELECT user_id FROM user_counts ORDER BY user_id OFFSET 2 ROWS", -1, 2},
		{"SELECT user_id FROM user_counts LIMIT ALL", -1, 0},
		{"SELECT user_id FROM user_counts LIMIT ALL OFFSET 3", -1, 3},
		{"SELECT user_id FROM user_counts ORDER BY user_id OFFSET 5 LIMIT 2", 2, 5},
		{"SELECT user_id FROM user_counts LIMIT 2 OFFSET 5", 2, 5},
		{"SELECT user_id FROM user_counts LIMIT 5, 2", 2, 5},
		{"SELECT user_id FROM user_counts FETCH FIRST 3 ROWS ONLY", 3, 0},
		{"SELECT user_id FROM user_counts fetch first row only", 1, 0},
		{"SELECT user_id FROM user_counts ORDER BY user_id OFFSET 1 ROW FETCH NEXT 2 ROWS ONLY", 2, 1},
		{"SELECT user_id FROM user_counts ORDER BY user_id FETCH FIRST 2 ROWS ONLY OFFSET 4 ROWS", 2, 4},
	} {
		sts, err := Parse(c.text)
		if err != nil {
			t.Errorf("%s: %v", c.text, err)
			continue
		}
		q, err := Bind(sts[0].(*Select), cat)
		if err != nil {
			t.Errorf("%s: %v", c.text, err)
			continue
		}
		if q.Limit != c.limit || q.Offset != c.offset {
			t.Errorf("%s: limit %d offset %d, want %d %d", c.text, q.Limit, q.Offset, c.limit, c.offset)
		}
	}
	for _, c := range []struct{ text, code string }{
		{"SELECT user_id FROM user_counts FETCH FIRST 2 ROWS WITH TIES", CodeNotSupported},
		{"SELECT user_id FROM user_counts LIMIT 2 FETCH FIRST 2 ROWS ONLY", CodeSyntax},
		{"SELECT user_id FROM user_counts FETCH FIRST 2 ROWS", CodeSyntax},
		{"SELECT DISTINCT user_id FROM user_counts ORDER BY n", CodeInvalidColumnReference},
		{"SELECT user_id FROM user_counts UNION ALL SELECT user_id FROM user_counts ORDER BY n", CodeUnknownColumn},
		{"SELECT user_id FROM user_counts ORDER BY nope", CodeUnknownColumn},
	} {
		sts, err := Parse(c.text)
		if err == nil {
			_, err = Bind(sts[0].(*Select), cat)
		}
		if e, ok := err.(*Error); !ok || e.Code != c.code {
			t.Errorf("%s: %v, want %s", c.text, err, c.code)
		}
	}
}

// TestOrderByNullsAndHidden: NULLS FIRST/LAST set each key's null order, and an ORDER BY
// expression not in the select list is a hidden column of an inner query the result drops.
func TestOrderByNullsAndHidden(t *testing.T) {
	cat := newTestCatalog()
	bind := func(text string) *Query {
		t.Helper()
		sts, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		q, err := Bind(sts[0].(*Select), cat)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return q
	}
	q := bind("SELECT user_id, n FROM user_counts ORDER BY n DESC NULLS LAST, user_id NULLS FIRST, n")
	if len(q.OrderBy) != 3 || q.OrderBy[0].NullsFirst() || !q.OrderBy[0].Desc || !q.OrderBy[1].NullsFirst() || q.OrderBy[2].NullsFirst() {
		t.Errorf("null orders: %+v", q.OrderBy)
	}
	q = bind("SELECT user_id FROM user_counts ORDER BY n * 2 DESC NULLS FIRST, user_id LIMIT 3")
	inner, ok := q.From.(*FromQuery)
	if !ok || len(q.Names) != 1 || q.Names[0] != "user_id" || q.Limit != -1 {
		t.Fatalf("ORDER BY a hidden expression: %T %v limit %d", q.From, q.Names, q.Limit)
	}
	iq := inner.Query
	if iq.Hidden != 1 || len(iq.Select) != 2 || iq.Limit != 3 || len(iq.OrderBy) != 2 || !iq.OrderBy[0].NullsFirst() {
		t.Errorf("inner query: hidden %d select %d limit %d order %+v", iq.Hidden, len(iq.Select), iq.Limit, iq.OrderBy)
	}
	// Over groups: an aggregate only ORDER BY reads.
	q = bind("SELECT user_id FROM orders GROUP BY user_id ORDER BY SUM(amount) DESC, COUNT(*)")
	if iq := q.From.(*FromQuery).Query; iq.Hidden != 2 || len(iq.Aggs) != 2 {
		t.Errorf("ORDER BY aggregates not selected: hidden %d aggs %d", iq.Hidden, len(iq.Aggs))
	}
}
