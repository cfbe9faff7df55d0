package planner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rsql/sql"
)

// checkGraph checks the structural promises of Graph against the plan it came from: one
// node per input, operator and output, in the plan's order; edges exactly along the plan's
// ports and stage edges; every node but a sink with one outgoing edge; every operator line
// of EXPLAIN reproduced by its node's label and detail.
func checkGraph(t *testing.T, p *Physical, g *PlanGraph) {
	t.Helper()
	nodes := map[string]GraphNode{}
	for _, n := range g.Nodes {
		if _, dup := nodes[n.ID]; dup {
			t.Fatalf("node %s twice", n.ID)
		}
		nodes[n.ID] = n
	}
	if len(g.Stages) != len(p.Stages) {
		t.Fatalf("%d graph stages for %d plan stages", len(g.Stages), len(p.Stages))
	}
	type edge struct{ from, to string }
	want := map[edge]bool{}
	for si, s := range p.Stages {
		gs := g.Stages[si]
		if gs.ID != s.ID || len(gs.Nodes) != len(s.Inputs)+len(s.Ops)+1 {
			t.Fatalf("stage %d: graph stage %+v", s.ID, gs)
		}
		for i, src := range s.Inputs {
			id := NodeID(s.ID, FromInput(i))
			if gs.Nodes[i] != id || nodes[id].Stream != src.Stream {
				t.Errorf("input %d of stage %d: %s %+v", i, s.ID, gs.Nodes[i], nodes[id])
			}
			if src.FromStage >= 0 {
				want[edge{OutputID(src.FromStage), id}] = true
				if nodes[id].Kind != "edge" || !slices.Contains(gs.Upstream, src.FromStage) {
					t.Errorf("edge input %s: %+v (upstream %v)", id, nodes[id], gs.Upstream)
				}
			} else if nodes[id].Kind != "source" {
				t.Errorf("stream input %s has kind %s", id, nodes[id].Kind)
			}
		}
		for i, op := range s.Ops {
			id := NodeID(s.ID, FromOp(i))
			if gs.Nodes[len(s.Inputs)+i] != id {
				t.Errorf("operator %d of stage %d listed as %s", i, s.ID, gs.Nodes[len(s.Inputs)+i])
			}
			for _, in := range op.Inputs {
				want[edge{NodeID(s.ID, in), id}] = true
			}
		}
		want[edge{NodeID(s.ID, s.Out), OutputID(s.ID)}] = true
		out := nodes[OutputID(s.ID)]
		if (s.Exchange != nil) != (out.Kind == "exchange") || s.Exchange == nil && out.Kind != "sink" {
			t.Errorf("output of stage %d: %+v", s.ID, out)
		}
	}
	got := map[edge]bool{}
	outgoing := map[string]int{}
	for _, e := range g.Edges {
		if _, ok := nodes[e.From]; !ok {
			t.Errorf("edge from unknown node %s", e.From)
		}
		if _, ok := nodes[e.To]; !ok {
			t.Errorf("edge to unknown node %s", e.To)
		}
		got[edge{e.From, e.To}] = true
		outgoing[e.From]++
	}
	for e := range want {
		if !got[e] {
			t.Errorf("edge %s -> %s missing", e.from, e.to)
		}
	}
	for e := range got {
		if !want[e] {
			t.Errorf("edge %s -> %s is not in the plan", e.from, e.to)
		}
	}
	for _, n := range g.Nodes {
		if n.Kind == "operator" {
			t.Errorf("node %s (%s) has no kind of its own: name it in nodeKind", n.ID, n.Label)
		}
		if wantOut := map[bool]int{true: 0, false: 1}[n.Kind == "sink"]; outgoing[n.ID] != wantOut {
			t.Errorf("node %s (%s) has %d outgoing edges, want %d", n.ID, n.Kind, outgoing[n.ID], wantOut)
		}
	}
	explain := Explain(nil, p)
	for _, n := range g.Nodes {
		if strings.HasPrefix(n.ID, "s") && strings.Contains(n.ID, ".op") {
			line := strings.TrimSpace(n.Label + " " + n.Detail)
			if !strings.Contains(explain, line) {
				t.Errorf("node %s %q is not a line of EXPLAIN:\n%s", n.ID, line, explain)
			}
		}
	}
	if _, err := json.Marshal(g); err != nil {
		t.Fatal(err)
	}
}

// Every golden query's plan, drawn: the graph follows the plan exactly.
func TestGraphOfGoldenPlans(t *testing.T) {
	files, err := filepath.Glob("testdata/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden queries: %v", err)
	}
	cat := goldenCatalog()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			q, opts, _ := querySQL(t, cat, string(b))
			if q == nil {
				return
			}
			_, p, err := Plan(q, opts)
			if err != nil {
				return
			}
			checkGraph(t, p, Graph(p))
		})
	}
}

// The shuffled aggregation, node by node.
func TestGraphOfExchange(t *testing.T) {
	b, err := os.ReadFile("testdata/exchange_broker.sql")
	if err != nil {
		t.Fatal(err)
	}
	q, opts, _ := querySQL(t, goldenCatalog(), string(b))
	_, p, err := Plan(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := Graph(p)
	var path []string
	for _, e := range g.Edges {
		path = append(path, e.From+">"+e.To)
	}
	// Stage 0: source → filter → exchange; stage 1: edge → aggregate → project → sink.
	for _, e := range []string{"s0.in0>s0.op0", "s0.op0>s0.out", "s0.out>s1.in0", "s1.in0>s1.op0", "s1.op0>s1.op1", "s1.op1>s1.out"} {
		if !slices.Contains(path, e) {
			t.Errorf("no edge %s in %v", e, path)
		}
	}
	kinds := map[string]string{}
	for _, n := range g.Nodes {
		kinds[n.ID] = n.Kind + ":" + n.Label
	}
	for id, want := range map[string]string{
		"s0.in0": "source:Source orders_mq", "s0.op0": "filter:Filter", "s0.out": "exchange:Exchange",
		"s1.in0": "edge:From stage 0", "s1.op0": "aggregate:Aggregate", "s1.op1": "project:Project",
		"s1.out": "sink:Sink totals_mq",
	} {
		if kinds[id] != want {
			t.Errorf("node %s = %q, want %q", id, kinds[id], want)
		}
	}
	if g.Nodes[len(g.Nodes)-1].Columns[0] != "user_id VARCHAR" {
		t.Errorf("sink columns %v", g.Nodes[len(g.Nodes)-1].Columns)
	}
}

// A stage with two stream inputs joined by a union: each input feeds the union on its own
// input index.
func TestGraphOfUnion(t *testing.T) {
	schema := sql.Schema{{Name: "a", Type: sql.TypeBigInt}}
	src := func(name string) SourceSpec {
		return SourceSpec{Stream: name, Connector: "file", Schema: schema, Columns: []int{0}, EventTime: -1, FromStage: -1}
	}
	p := &Physical{Stages: []*Stage{{
		ID:     0,
		Inputs: []SourceSpec{src("x"), src("y")},
		Ops: []Op{
			{Node: &UnionNode{Schema: schema}, Inputs: []Port{FromInput(0), FromInput(1)}},
			{Node: &LimitNode{N: 3}, Inputs: []Port{FromOp(0)}},
		},
		Out:  FromOp(1),
		Sink: SinkSpec{Schema: schema},
	}}}
	g := Graph(p)
	checkGraph(t, p, g)
	var into []int
	for _, e := range g.Edges {
		if e.To == "s0.op0" {
			into = append(into, e.Input)
		}
	}
	if !slices.Equal(into, []int{0, 1}) {
		t.Errorf("union inputs %v, want [0 1]", into)
	}
	if g.Nodes[len(g.Nodes)-1].Label != "Sink client" {
		t.Errorf("sink %+v", g.Nodes[len(g.Nodes)-1])
	}
}
