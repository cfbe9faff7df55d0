package exec

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/state"
)

// A filter and the projection over it that share a subexpression compute it once per row
// through one memo: the projection must read each kept row's own value after the filter
// has dropped the rows before it (Memo.Move), and a branch that is not taken computes
// nothing. The rows are checked against the same expressions computed here.
func TestFilterProjectShareSubexpressions(t *testing.T) {
	const query = `SELECT user_id, REGEXP_EXTRACT(user_id, 'u([0-9]*)7', 1) AS d,
		CASE WHEN n IS NULL THEN 'none' ELSE REGEXP_EXTRACT(user_id, 'u([0-9]*)7', 1) || '/' || CAST(n AS VARCHAR) END AS t
		FROM orders WHERE REGEXP_EXTRACT(user_id, 'u([0-9]*)7', 1) IS NOT NULL OR n > 40`
	plan := planSQL(t, query, planCatalog(), "memo")
	var filter *planner.FilterNode
	var project *planner.ProjectNode
	for _, st := range plan.Stages {
		for _, op := range st.Ops {
			switch n := op.Node.(type) {
			case *planner.FilterNode:
				filter = n
			case *planner.ProjectNode:
				project = n
			}
		}
	}
	if filter == nil || project == nil || filter.Memo == nil || project.Memo != filter.Memo || !project.AfterFilter {
		t.Fatalf("the filter and the projection do not share a memo: %+v %+v", filter, project)
	}

	var rows rowCollector
	evs := [2][]event4{genEvents(31, 4000, 300, 0), genEvents(32, 4000, 300, 0)}
	src := newMemSource(true, 97, "0", "1")
	feedAll(src, "0", evs[0])
	feedAll(src, "1", evs[1])
	j, err := Start(context.Background(), "memo", plan, Env{
		OpenSource: func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
		NewFormat:  newTestFormat, OnRow: rows.onRow, Store: state.NewMemory(), CheckpointInterval: -1, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}

	re := regexp.MustCompile(`u([0-9]*)7`)
	var want []string
	for _, part := range evs {
		for _, e := range part {
			m := re.FindStringSubmatch(e.user)
			if m == nil && (e.nNull || e.n <= 40) {
				continue
			}
			d, tx := "NULL", "NULL"
			if m != nil {
				d = m[1]
			}
			switch {
			case e.nNull:
				tx = "none"
			case m != nil:
				tx = m[1] + "/" + strconv.FormatInt(e.n, 10)
			}
			want = append(want, e.user+","+d+","+tx)
		}
	}
	if len(want) == len(evs[0])+len(evs[1]) || len(want) == 0 {
		t.Fatalf("the filter keeps %d of the rows: the test needs some dropped", len(want))
	}
	if d := diff(rows.snapshot(), want); d != "" {
		t.Fatal(d)
	}
}
