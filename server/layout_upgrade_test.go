package server

import (
	"strings"
	"testing"

	"rsql/planner"
)

// A job created by a release that planned every join's output through an exchange
// (planner.LayoutFirst; its catalog entry records no layout) is planned in that layout
// after an upgrade: its checkpoints name its operators by stage, and in the current layout
// the aggregation over the join would run in the join's stage and find none of its state
// (docs/operations.md, "Upgrading"). The count goes on from the stored one.
func TestJobKeepsItsPlanLayoutAcrossUpgrade(t *testing.T) {
	newJobLayout = planner.LayoutFirst
	defer func() { newJobLayout = planner.LayoutCurrent }()
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM a (k VARCHAR, x INT) WITH (queues = 2)")
	te.mustExec("CREATE STREAM b (k VARCHAR, y INT) WITH (queues = 2)")
	te.mustExec("SET offset_reset = 'earliest'")
	te.mustExec("INSERT INTO a VALUES ('p', 1), ('q', 2)")
	te.mustExec("INSERT INTO b VALUES ('p', 10), ('p', 11), ('q', 12)")
	te.mustExec("CREATE MATERIALIZED VIEW per_k AS SELECT a.k, COUNT(*) AS n FROM a JOIN b ON a.k = b.k GROUP BY a.k")
	waitFor(t, "the view's rows", func() bool {
		_, rows, err := te.exec("SELECT n FROM per_k WHERE k = 'p'")
		return err == nil && len(rows[0]) == 1 && rows[0][0][0] == "2"
	})
	// What the catalog of the older release holds: no layout.
	te.rewriteCatalog(func(data string) string { return strings.Replace(data, `"layout": 1,`, "", 1) })
	newJobLayout = planner.LayoutCurrent
	te.open()
	te.mustExec("INSERT INTO b VALUES ('p', 13)")
	waitFor(t, "the view's job to go on after the upgrade", func() bool {
		_, rows, err := te.exec("SELECT n FROM per_k WHERE k = 'p'")
		return err == nil && len(rows[0]) == 1 && rows[0][0][0] == "3"
	})
	_, rows := te.mustExec("SELECT k, n FROM per_k ORDER BY k")
	if len(rows[0]) != 2 || strings.Join(rows[0][0], ",") != "p,3" || strings.Join(rows[0][1], ",") != "q,1" {
		t.Errorf("after the upgrade the view holds %v, want p 3 and q 1", rows[0])
	}
	// A job created now records the current layout.
	te.mustExec("CREATE MATERIALIZED VIEW per_k2 AS SELECT a.k, COUNT(*) AS n FROM a JOIN b ON a.k = b.k GROUP BY a.k")
	for _, j := range te.e.cat.Jobs() {
		if j.Sink == "per_k2" && j.Layout != planner.LayoutCurrent {
			t.Errorf("a new job records layout %d, want %d", j.Layout, planner.LayoutCurrent)
		}
	}
}
