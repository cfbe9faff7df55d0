package exec

import (
	"context"
	"errors"
	"fmt"

	"rsql/planner"
	"rsql/sql"
)

// Building a stage: its operators from the plan (newOperator), the schemas of their ports,
// and the side outputs (dead letters, late rows) of its root stream.

func newStage(j *Job, ps *planner.Stage) *stage {
	st := &stage{job: j, plan: ps, in: make(chan event, 64), wm: MinWatermark, statWM: MinWatermark,
		splits: map[string]*split{},
		ended:  make([]bool, len(ps.Inputs)), barrierSeen: make([]bool, len(ps.Inputs)), stash: make([][]event, len(ps.Inputs))}
	st.alignFloor.Store(MaxWatermark)
	st.firstTs = MinWatermark
	return st
}

// buildOps makes the stage's operators and wires their emitters.
func (st *stage) buildOps(ctx context.Context) error {
	ps := st.plan
	st.nodes = make([]*opNode, len(ps.Ops))
	st.inEmit = make([]*emitter, len(ps.Inputs))
	used := map[planner.Port]bool{}
	consume := func(p planner.Port, e *emitter) error {
		if used[p] {
			return fmt.Errorf("%w: stage %d: %v is read twice", ErrBadPlan, ps.ID, p)
		}
		used[p] = true
		switch {
		case p.Op >= 0 && p.Op < len(ps.Ops):
			st.nodes[p.Op].emit = e
		case p.Op < 0 && p.Input >= 0 && p.Input < len(ps.Inputs):
			st.inEmit[p.Input] = e
		default:
			return fmt.Errorf("%w: stage %d reads a port that does not exist: %+v", ErrBadPlan, ps.ID, p)
		}
		return nil
	}
	schemas := make([]sql.Schema, len(ps.Ops)) // each operator's input row, for late rows
	st.opIn = schemas
	for i, op := range ps.Ops {
		for k, p := range op.Inputs {
			if p.Op >= i {
				return fmt.Errorf("%w: stage %d: operator %d reads operator %d after it", ErrBadPlan, ps.ID, i, p.Op)
			}
			if k == 0 {
				schemas[i] = st.portSchema(p, schemas)
			}
		}
		n, err := st.newOperator(ctx, i, op, schemas[i])
		if err != nil {
			return err
		}
		st.nodes[i] = &opNode{op: n}
	}
	for i, op := range ps.Ops {
		if len(op.Inputs) == 0 {
			return fmt.Errorf("%w: stage %d: operator %d has no input", ErrBadPlan, ps.ID, i)
		}
		for k, p := range op.Inputs {
			if err := consume(p, &emitter{st: st, op: i, in: k}); err != nil {
				return err
			}
		}
	}
	if err := consume(ps.Out, &emitter{st: st, op: -1}); err != nil {
		return err
	}
	// Watermark holds accumulate along the DAG (operators are in topological order).
	portHold := func(p planner.Port) int64 {
		if p.Op < 0 {
			return 0
		}
		h := st.nodes[p.Op].hold
		if wh, ok := st.nodes[p.Op].op.(watermarkHolder); ok {
			h += wh.WatermarkHold()
		}
		return h
	}
	for i, op := range ps.Ops {
		for _, p := range op.Inputs {
			st.nodes[i].hold = max(st.nodes[i].hold, portHold(p))
		}
	}
	st.outHold = portHold(ps.Out)
	for i, n := range st.nodes {
		if n.emit == nil {
			return fmt.Errorf("%w: stage %d: the output of operator %d goes nowhere", ErrBadPlan, ps.ID, i)
		}
	}
	for i, e := range st.inEmit {
		if e == nil {
			return fmt.Errorf("%w: stage %d: input %d goes nowhere", ErrBadPlan, ps.ID, i)
		}
	}
	return nil
}

// portSchema is the row layout of a port (for encoding late rows).
func (st *stage) portSchema(p planner.Port, ops []sql.Schema) sql.Schema {
	if p.Op < 0 {
		src := st.plan.Inputs[p.Input]
		if src.Columns == nil {
			return src.Schema
		}
		s := make(sql.Schema, len(src.Columns))
		for i, c := range src.Columns {
			if c >= 0 && c < len(src.Schema) {
				s[i] = src.Schema[c]
			}
		}
		return s
	}
	in := ops[p.Op]
	switch n := st.plan.Ops[p.Op].Node.(type) {
	case *planner.UnionNode:
		return n.Schema
	case *planner.JoinNode:
		return n.Schema
	case *planner.ProjectNode:
		return n.Schema
	case *planner.WindowAssignNode:
		return n.Schema
	case *planner.TableFuncNode:
		return n.Schema
	case *planner.AggregateNode:
		return n.Schema
	case *planner.TopNNode:
		return n.Schema
	case *planner.OverNode:
		return n.Schema
	}
	if s, ok := st.plan.Ops[p.Op].Node.(interface{ OutSchema(sql.Schema) sql.Schema }); ok {
		return s.OutSchema(in)
	}
	return in
}

// bad is the bad-record path (rowerrors.go) of the rows that flow through port p.
func (st *stage) bad(p planner.Port) *badRows { return &badRows{st: st, port: p} }

// portRoot follows port p of the stage back to the stream its rows were read from: through
// an operator's first input, and from a stage input that is an edge to the upstream
// stage's output. It returns the stage that reads the stream and the stream's input index
// there. Rows of a join's or a union's output count as their first input's (docs/sql.md,
// "Time, watermarks and late rows"); the operators before them see one input's rows each.
func (st *stage) portRoot(p planner.Port) (*planner.Stage, int) {
	ps := st.plan
	for range 1 << 16 { // a plan is acyclic; the bound only guards a malformed one
		if p.Op >= 0 {
			if p.Op >= len(ps.Ops) || len(ps.Ops[p.Op].Inputs) == 0 {
				break
			}
			p = ps.Ops[p.Op].Inputs[0]
			continue
		}
		if p.Input < 0 || p.Input >= len(ps.Inputs) {
			break
		}
		src := ps.Inputs[p.Input]
		if src.FromStage < 0 {
			return ps, p.Input
		}
		up := st.job.plan.Stage(src.FromStage)
		if up == nil {
			return ps, p.Input
		}
		ps, p = up, up.Out
	}
	return ps, 0
}

// rootSource is the stream the rows of port p were read from (for its late_* and dlq_*
// options and to name it in row errors).
func (st *stage) rootSource(p planner.Port) planner.SourceSpec {
	ps, in := st.portRoot(p)
	return ps.Inputs[in]
}

// rootDLQ is the dead-letter output of the stream the rows of port p were read from (it
// belongs to the stage that reads that stream; rawOutput is safe for concurrent use), or
// nil.
func (st *stage) rootDLQ(p planner.Port) *rawOutput {
	ps, in := st.portRoot(p)
	s := st.job.stageByID(ps.ID)
	if s == nil || in >= len(s.inputs) {
		return nil
	}
	if si, ok := s.inputs[in].(*sourceInput); ok {
		return si.dlq
	}
	return nil
}

func (st *stage) newOperator(ctx context.Context, i int, op planner.Op, in sql.Schema) (Operator, error) {
	env := &st.job.env
	id := st.plan.ID
	switch n := op.Node.(type) {
	case *planner.FilterNode:
		return &filterOp{pred: n.Pred, memo: n.Memo, bad: st.bad(op.Inputs[0]), schema: in, ctx: ctx}, nil
	case *planner.ProjectNode:
		return &projectOp{exprs: n.Exprs, memo: n.Memo, afterFilter: n.AfterFilter, identity: n.Identity, bad: st.bad(op.Inputs[0]), schema: in, ctx: ctx}, nil
	case *planner.TableFuncNode:
		return &tableFuncOp{n: n, bad: st.bad(op.Inputs[0]), schema: in, ctx: ctx}, nil
	case *planner.WindowAssignNode:
		if n.Window.Kind != planner.WindowTumble && n.Window.Kind != planner.WindowHop {
			return nil, fmt.Errorf("%w: stage %d: window assignment needs TUMBLE or HOP", ErrBadPlan, id)
		}
		return &windowAssignOp{w: n.Window}, nil
	case *planner.AggregateNode:
		if err := checkWindow(n.Window); err != nil {
			return nil, fmt.Errorf("%w: stage %d: %v", ErrBadPlan, id, err)
		}
		if n.Retracting {
			if n.Window.Kind != planner.WindowNone {
				return nil, fmt.Errorf("%w: stage %d: a windowed aggregation over a relation whose rows change", ErrBadPlan, id)
			}
			oid := OperatorID(id, "agg", i)
			st.opIDs = append(st.opIDs, oid)
			a := newRetractAggOp(n, st.job.name, oid, env.Store)
			a.bad, a.schema = st.bad(op.Inputs[0]), in
			return a, nil
		}
		late, err := st.lateOutput(ctx, op.Inputs[0], in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "agg", i)
		st.opIDs = append(st.opIDs, oid)
		a := newAggOp(n, st.job.name, oid, env.Store, late, &st.job.cnt)
		a.bad, a.schema = st.bad(op.Inputs[0]), in
		a.hashedIn = n.KeysHashed && len(op.Inputs) == 1 && op.Inputs[0].Op < 0
		a.cacheMax = aggCacheSize(n, env.Store, env.AggCacheGroups)
		a.full, a.press = st.job.kickCheckpoint, st.job.press()
		return a, nil
	case *planner.LimitNode:
		return &limitOp{n: n.N, offset: n.Offset}, nil
	case *planner.UnionNode:
		return unionOp{}, nil
	case *planner.SortNode:
		return &sortOp{keys: n.Keys, changes: n.Changes, key: n.Key}, nil
	case *planner.JoinNode:
		late, err := st.lateOutput(ctx, op.Inputs[0], in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "join", i)
		st.opIDs = append(st.opIDs, oid)
		j := newJoinOp(n, st.job.name, oid, env.Store, late, &st.job.cnt)
		if len(op.Inputs) > 1 {
			// The right input's late rows go to its own stream's late output.
			if j.late[1], err = st.lateOutput(ctx, op.Inputs[1], st.portSchema(op.Inputs[1], st.opIn)); err != nil {
				return nil, err
			}
		}
		j.logf = env.Logf
		j.setCache(joinCacheSize(n, env.Store, env.JoinCacheKeys))
		j.joins = st.job.cachedJoins()
		j.full, j.press = st.job.kickCheckpoint, st.job.press()
		j.committed = func() int64 {
			if st.group == nil {
				return 0
			}
			return st.group.committed.Load()
		}
		return j, nil
	case *planner.LookupJoinNode:
		return st.openLookup(ctx, n, op.Inputs[0], in)
	case *planner.OverNode:
		oid := OperatorID(id, "over", i)
		st.opIDs = append(st.opIDs, oid)
		o := newOverOp(n, st.job.name, oid, env.Store)
		o.cacheMax = overCacheSize(n, env.Store, env.AggCacheGroups)
		o.full, o.press = st.job.kickCheckpoint, st.job.press()
		return o, nil
	case *planner.TopNNode:
		if n.AtSource {
			oid := OperatorID(id, "rows", i)
			st.opIDs = append(st.opIDs, oid)
			return newTableRowsOp(n, st.job.name, oid, env.Store), nil
		}
		late, err := st.lateOutput(ctx, op.Inputs[0], in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "topn", i)
		st.opIDs = append(st.opIDs, oid)
		if n.Mode == planner.TopNChanges {
			t := newTopNChangesOp(n, st.job.name, oid, env.Store)
			t.cacheMax = topNCacheSize(n, env.Store, env.AggCacheGroups)
			t.full, t.press = st.job.kickCheckpoint, st.job.press()
			return t, nil
		}
		t := newTopNOp(n, st.job.name, oid, env.Store, late, &st.job.cnt)
		t.cacheMax = dedupCacheSize(n, env.Store, env.AggCacheGroups)
		t.full, t.press = st.job.kickCheckpoint, st.job.press()
		return t, nil
	}
	return nil, fmt.Errorf("%w: stage %d: unknown node %T", ErrBadPlan, id, op.Node)
}

// lateOutput opens the late-row output of the stream the rows of port p were read from
// (its late_topic/late_path), once per stage for a stream and row layout; rows are
// encoded over schema in.
func (st *stage) lateOutput(ctx context.Context, p planner.Port, in sql.Schema) (*sideOutput, error) {
	env := &st.job.env
	spec, ok := sideSpec(st.rootSource(p), "late", in)
	if !ok {
		return nil, nil
	}
	key := spec.Stream + "\x00" + fmt.Sprint(in)
	if l := st.lates[key]; l != nil {
		return l, nil
	}
	if env.OpenSink == nil || env.NewFormat == nil {
		return nil, fmt.Errorf("%w: late output %s needs Env.OpenSink and Env.NewFormat", ErrMissingEnv, spec.Stream)
	}
	op, err := openSinkOp(ctx, env, spec, &counters{})
	if err != nil {
		return nil, err
	}
	l := &sideOutput{op: *op}
	if st.lates == nil {
		st.lates = map[string]*sideOutput{}
	}
	st.lates[key] = l
	st.lateOrd = append(st.lateOrd, l)
	return l, nil
}

func checkWindow(w planner.WindowSpec) error {
	switch w.Kind {
	case planner.WindowTumble:
		if w.Size <= 0 {
			return errors.New("tumbling window size must be positive")
		}
	case planner.WindowHop:
		if w.Size <= 0 || w.Slide <= 0 {
			return errors.New("hopping window size and slide must be positive")
		}
	case planner.WindowSession:
		if w.Gap <= 0 {
			return errors.New("session gap must be positive")
		}
	}
	return nil
}

// cachedJoins is how many joins of the job keep their rows in a bounded cache: they share
// the job's bytes of rows in memory (joinCacheBytes, pressBytes).
func (j *Job) cachedJoins() int {
	n := 0
	for _, ps := range j.plan.Stages {
		for _, op := range ps.Ops {
			if jn, ok := op.Node.(*planner.JoinNode); ok && joinCacheSize(jn, j.env.Store, j.env.JoinCacheKeys) > 0 {
				n++
			}
		}
	}
	return n
}
