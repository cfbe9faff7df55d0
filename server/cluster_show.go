package server

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rsql/exec"
	"rsql/sql"
)

// SHOW UNITS and the cluster's metrics: who owns which unit of which job.

// showUnits is SHOW UNITS: one row per unit (stage, split) of every RUNNING job. In
// cluster mode owner is the instance holding it in the shared store (NULL while it moves),
// assigned the instance the division gives it, here whether this process runs it, and
// next_offset and epoch what its last checkpoint says; a single server owns every unit of
// the jobs it runs.
func (e *Engine) showUnits() (*Result, error) {
	cols := sql.Schema{{Name: "job", Type: sql.TypeVarchar}, {Name: "unit", Type: sql.TypeVarchar},
		{Name: "stage", Type: sql.TypeInt}, {Name: "split", Type: sql.TypeVarchar},
		{Name: "owner", Type: sql.TypeVarchar}, {Name: "assigned", Type: sql.TypeVarchar},
		{Name: "here", Type: sql.TypeBool}, {Name: "next_offset", Type: sql.TypeBigInt},
		{Name: "epoch", Type: sql.TypeBigInt}}
	var rows []sql.Row
	c := e.cluster
	for _, j := range e.cat.Jobs() {
		if j.State != JobRunning {
			continue
		}
		rj := e.running(j.ID)
		local := map[exec.Unit]exec.SplitStats{}
		if rj != nil {
			for _, sp := range rj.job.Stats().Splits {
				local[exec.Unit{Stage: sp.Stage, Split: sp.Split}] = sp
			}
		}
		if c == nil {
			var us []exec.Unit
			for u := range local {
				us = append(us, u)
			}
			sortUnits(us)
			for _, u := range us {
				rows = append(rows, sql.Row{sql.Varchar(j.ID), sql.Varchar(u.String()), sql.Int(int64(u.Stage)), sql.Varchar(u.Split),
					sql.Varchar("this server"), sql.Varchar("this server"), sql.Bool(true), sql.BigInt(local[u].Offset), sql.Null})
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		infos, err := c.cs.JobSplitInfos(ctx, j.ID)
		cancel()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		var units []exec.Unit
		whole := false
		if cj := c.jobs[j.ID]; cj != nil {
			units, whole = cj.units, cj.whole
		}
		members := c.members
		c.mu.Unlock()
		byName := map[string]int{}
		for i, in := range infos {
			byName[in.Split] = i
		}
		seen := map[exec.Unit]bool{}
		for _, u := range units {
			seen[u] = true
		}
		for _, in := range infos {
			if u, ok := exec.ParseUnit(in.Split); ok && !seen[u] {
				units = append(units, u)
				seen[u] = true
			}
		}
		sortUnits(units)
		assignment := assign(j.ID, units, members, whole)
		for _, u := range units {
			row := sql.Row{sql.Varchar(j.ID), sql.Varchar(u.String()), sql.Int(int64(u.Stage)), sql.Varchar(u.Split),
				sql.Null, nullable(assignment[u]), sql.Bool(false), sql.Null, sql.Null}
			if i, ok := byName[u.String()]; ok {
				in := infos[i]
				row[4] = nullable(in.Owner)
				if in.HasOffset {
					row[7] = sql.BigInt(in.Offset)
				}
				if in.Epoch > 0 {
					row[8] = sql.BigInt(in.Epoch)
				}
			}
			if _, ok := local[u]; ok {
				row[6] = sql.Bool(true)
			}
			rows = append(rows, row)
		}
	}
	return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}, nil
}

var (
	descMembers  = prometheus.NewDesc("rsql_cluster_members", "Live instances sharing the Postgres store, as this instance sees them.", nil, nil)
	descUnit     = prometheus.NewDesc("rsql_job_unit", "A unit (stage, split) of a job this instance runs (1).", []string{"job", "stage", "split"}, nil)
	descAssigned = prometheus.NewDesc("rsql_job_units_assigned", "Units of a job the division gives this instance.", []string{"job"}, nil)
	descMoves    = prometheus.NewDesc("rsql_job_unit_moves_total", "Units of a job moved to this instance (taken over) since it started.", []string{"job"}, nil)
	descMoveSecs = prometheus.NewDesc("rsql_job_unit_move_seconds_total", "Time those moves took, from the change of the assignment to running here.", []string{"job"}, nil)
	descLastMove = prometheus.NewDesc("rsql_job_unit_last_move_seconds", "How long the last unit moved to this instance took.", []string{"job"}, nil)
	clusterDescs = []*prometheus.Desc{descMembers, descUnit, descAssigned, descMoves, descMoveSecs, descLastMove}
)

// collect exports the cluster's metrics (engineCollector calls it in cluster mode).
func (c *cluster) collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	members := len(c.members)
	type jobMetrics struct {
		id                 string
		local              []exec.Unit
		moves              int64
		moveTime, lastMove time.Duration
	}
	var jobs []jobMetrics
	for id, cj := range c.jobs {
		jm := jobMetrics{id: id, moves: cj.moves, moveTime: cj.moveTime, lastMove: cj.lastMove}
		for u := range cj.local {
			jm.local = append(jm.local, u)
		}
		jobs = append(jobs, jm)
	}
	c.mu.Unlock()
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].id < jobs[j].id })
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(members))
	for _, jm := range jobs {
		if c.e.running(jm.id) != nil {
			for _, u := range jm.local {
				ch <- prometheus.MustNewConstMetric(descUnit, prometheus.GaugeValue, 1, jm.id, strconv.Itoa(u.Stage), u.Split)
			}
		}
		ch <- prometheus.MustNewConstMetric(descAssigned, prometheus.GaugeValue, float64(len(c.assigned(jm.id, c.self.Name))), jm.id)
		ch <- prometheus.MustNewConstMetric(descMoves, prometheus.CounterValue, float64(jm.moves), jm.id)
		ch <- prometheus.MustNewConstMetric(descMoveSecs, prometheus.CounterValue, jm.moveTime.Seconds(), jm.id)
		if jm.moves > 0 {
			ch <- prometheus.MustNewConstMetric(descLastMove, prometheus.GaugeValue, jm.lastMove.Seconds(), jm.id)
		}
	}
}
