package planner

import (
	"strconv"
	"strings"

	"rsql/sql"
)

// PlanGraph is a physical plan as a graph of stages and operators, for drawing (the web
// console serves it as JSON). It holds the same facts as EXPLAIN's physical part and is
// built from the same node descriptions.
//
// Node ids name the place in the plan, and so the counters of the running job that belong
// to it: "s<stage>.in<i>" is input i of a stage, "s<stage>.op<i>" its operator i (Stage.Ops
// order), "s<stage>.out" its exchange or sink. Every node but a sink has exactly one
// outgoing edge, whose rows are the node's output (operators and inputs feed one port
// each); an edge input of a stage has the upstream stage's exchange as its only incoming
// edge.
type PlanGraph struct {
	Stages []GraphStage `json:"stages"`
	Nodes  []GraphNode  `json:"nodes"`
	Edges  []GraphEdge  `json:"edges"`
}

// GraphStage is one stage: its id and its nodes' ids, inputs first, then operators in
// topological order, then the output.
type GraphStage struct {
	ID    int      `json:"id"`
	Nodes []string `json:"nodes"`
	// Upstream lists the stages whose exchanges feed this one.
	Upstream []int `json:"upstream,omitempty"`
}

// GraphNode is one input, operator or output of a stage.
type GraphNode struct {
	ID    string `json:"id"`
	Stage int    `json:"stage"`
	// Kind is source (a stream input), edge (an input from an upstream stage), filter,
	// project, table_function, window_assign, join, lookup_join, aggregate, topn, sort,
	// limit, union, exchange or sink.
	Kind string `json:"kind"`
	// Label is the node's name as EXPLAIN prints it ("Filter", "Source orders",
	// "Sink client"); Detail the rest of EXPLAIN's line (predicate, keys, options...).
	Label  string `json:"label"`
	Detail string `json:"detail,omitempty"`
	// Stream is the stream a source reads or a sink writes ("" for the client), or the
	// shuffle topic of an exchange and of the edge input that reads it.
	Stream string `json:"stream,omitempty"`
	// Columns is the row the node outputs (for a sink: the sink's columns).
	Columns []string `json:"columns,omitempty"`
}

// GraphEdge carries the rows of node From (its output) to node To; Input is the input
// index of To they arrive on (an operator with several inputs: UNION).
type GraphEdge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Input int    `json:"input"`
}

// NodeID returns the graph id of a port of stage st: "s<st>.op<i>" or "s<st>.in<i>".
func NodeID(stage int, p Port) string {
	if p.Op >= 0 {
		return "s" + strconv.Itoa(stage) + ".op" + strconv.Itoa(p.Op)
	}
	return "s" + strconv.Itoa(stage) + ".in" + strconv.Itoa(p.Input)
}

// OutputID returns the graph id of stage st's exchange or sink.
func OutputID(stage int) string { return "s" + strconv.Itoa(stage) + ".out" }

// Graph describes p as a PlanGraph. Nothing is re-derived: inputs, operators, ports and
// outputs are the plan's, described with EXPLAIN's text.
func Graph(p *Physical) *PlanGraph {
	g := &PlanGraph{Stages: []GraphStage{}, Nodes: []GraphNode{}, Edges: []GraphEdge{}}
	if p == nil {
		return g
	}
	for _, s := range p.Stages {
		gs := GraphStage{ID: s.ID}
		rows := make([]sql.Schema, len(s.Inputs))
		for i, src := range s.Inputs {
			row := make(sql.Schema, 0, len(src.Columns))
			for _, c := range src.Columns {
				if c >= 0 && c < len(src.Schema) {
					row = append(row, src.Schema[c])
				} else {
					row = append(row, sql.Column{Name: "#" + strconv.Itoa(c)})
				}
			}
			if src.Columns == nil {
				row = src.Schema
			}
			rows[i] = row
			n := GraphNode{ID: NodeID(s.ID, FromInput(i)), Stage: s.ID, Kind: "source", Label: "Source " + src.Stream,
				Stream: src.Stream, Columns: row.Names()}
			var detail []string
			if src.FromStage >= 0 {
				n.Kind, n.Label = "edge", "From stage "+strconv.Itoa(src.FromStage)
				gs.Upstream = append(gs.Upstream, src.FromStage)
				g.Edges = append(g.Edges, GraphEdge{From: OutputID(src.FromStage), To: n.ID})
				detail = append(detail, "via "+src.Stream)
			} else {
				detail = append(detail, "connector="+src.Connector)
				if len(src.Options.Raw) > 0 {
					detail = append(detail, "options="+optionsText(src.Options.Raw))
				}
			}
			if src.EventTime >= 0 && src.EventTime < len(row) {
				detail = append(detail, "event-time="+row[src.EventTime].Name)
				if src.FromStage < 0 {
					detail = append(detail, "watermark-delay="+intervalText(src.WatermarkDelay))
				}
			}
			n.Detail = strings.Join(detail, " ")
			g.Nodes = append(g.Nodes, n)
			gs.Nodes = append(gs.Nodes, n.ID)
		}
		outRows := make([]sql.Schema, len(s.Ops))
		rowOf := func(p Port) sql.Schema {
			if p.Op >= 0 && p.Op < len(outRows) {
				return outRows[p.Op]
			}
			if p.Op < 0 && p.Input >= 0 && p.Input < len(rows) {
				return rows[p.Input]
			}
			return nil
		}
		for i, op := range s.Ops {
			var row sql.Schema
			if len(op.Inputs) > 0 {
				row = rowOf(op.Inputs[0])
			}
			parts, out := nodeText(op.Node, row)
			if out == nil {
				out = row
			}
			outRows[i] = out
			n := GraphNode{ID: NodeID(s.ID, FromOp(i)), Stage: s.ID, Kind: nodeKind(op.Node), Label: parts[0],
				Detail: strings.Join(parts[1:], " "), Columns: out.Names()}
			g.Nodes = append(g.Nodes, n)
			gs.Nodes = append(gs.Nodes, n.ID)
			for k, in := range op.Inputs {
				g.Edges = append(g.Edges, GraphEdge{From: NodeID(s.ID, in), To: n.ID, Input: k})
			}
		}
		out := GraphNode{ID: OutputID(s.ID), Stage: s.ID}
		if x := s.Exchange; x != nil {
			out.Kind, out.Label = "exchange", "Exchange"
			detail := []string{"keys=[" + strings.Join(x.Texts, ", ") + "]"}
			if x.Queues > 0 {
				detail = append(detail, "queues="+strconv.Itoa(x.Queues))
			}
			out.Detail, out.Stream, out.Columns = strings.Join(detail, " "), x.Topic, rowOf(s.Out).Names()
		} else {
			k := s.Sink
			out.Kind, out.Stream = "sink", k.Stream
			if k.Stream == "" {
				out.Label = "Sink client"
			} else {
				out.Label = "Sink " + k.Stream
			}
			var detail []string
			if k.Connector != "" {
				detail = append(detail, "connector="+k.Connector)
			}
			if len(k.Options.Raw) > 0 {
				detail = append(detail, "options="+optionsText(k.Options.Raw))
			}
			if len(k.KeyColumns) > 0 {
				keys := make([]string, len(k.KeyColumns))
				for i, c := range k.KeyColumns {
					if c >= 0 && c < len(k.Schema) {
						keys[i] = k.Schema[c].Name
					} else {
						keys[i] = "#" + strconv.Itoa(c)
					}
				}
				detail = append(detail, "key=["+strings.Join(keys, ", ")+"]")
			}
			out.Detail = strings.Join(detail, " ")
			for _, c := range k.Schema {
				out.Columns = append(out.Columns, c.Name+" "+c.Type.String())
			}
		}
		g.Nodes = append(g.Nodes, out)
		gs.Nodes = append(gs.Nodes, out.ID)
		g.Edges = append(g.Edges, GraphEdge{From: NodeID(s.ID, s.Out), To: out.ID})
		g.Stages = append(g.Stages, gs)
	}
	return g
}

func nodeKind(n Node) string {
	switch n.(type) {
	case *FilterNode:
		return "filter"
	case *ProjectNode:
		return "project"
	case *WindowAssignNode:
		return "window_assign"
	case *TableFuncNode:
		return "table_function"
	case *AggregateNode:
		return "aggregate"
	case *LimitNode:
		return "limit"
	case *UnionNode:
		return "union"
	case *TopNNode:
		return "topn"
	case *OverNode:
		return "over"
	case *SortNode:
		return "sort"
	case *JoinNode:
		return "join"
	case *ExchangeNode:
		return "exchange"
	case *LookupJoinNode:
		return "lookup_join"
	}
	return "operator"
}
