package planner

import (
	"sort"
	"strconv"
	"strings"

	"rsql/sql"
)

// Explain renders the (optimized) logical plan as an indented tree, root first, and the
// physical plan stage by stage, operators in data-flow order. Either may be nil.
func Explain(l LogicalNode, p *Physical) string {
	var b strings.Builder
	if l != nil {
		b.WriteString("Logical plan:\n")
		explainLogical(&b, l, 1)
	}
	if p != nil {
		if l != nil {
			b.WriteString("\n")
		}
		b.WriteString("Physical plan:\n")
		for _, s := range p.Stages {
			explainStage(&b, s)
		}
	}
	return b.String()
}

func explainLogical(b *strings.Builder, l LogicalNode, depth int) {
	b.WriteString(strings.Repeat("  ", depth))
	b.WriteString(l.String())
	b.WriteString("\n")
	for _, c := range l.Children() {
		explainLogical(b, c, depth+1)
	}
}

func explainStage(b *strings.Builder, s *Stage) {
	line := func(parts ...string) {
		b.WriteString("    ")
		b.WriteString(strings.Join(parts, " "))
		b.WriteString("\n")
	}
	b.WriteString("  Stage " + strconv.Itoa(s.ID) + "\n")
	chain := s.isChain()
	rows := make([]sql.Schema, len(s.Inputs)) // the row of each input
	for i, src := range s.Inputs {
		row := make(sql.Schema, 0, len(src.Columns))
		for _, c := range src.Columns {
			if c >= 0 && c < len(src.Schema) {
				row = append(row, src.Schema[c])
			} else {
				row = append(row, sql.Column{Name: "#" + strconv.Itoa(c)})
			}
		}
		rows[i] = row
		parts := []string{"Source", src.Stream}
		if !chain {
			parts = []string{"Input " + strconv.Itoa(i) + ":", "Source", src.Stream}
		}
		if src.FromStage >= 0 {
			parts = append(parts, "from-stage="+strconv.Itoa(src.FromStage))
		}
		parts = append(parts, "connector="+src.Connector)
		if len(src.Options.Raw) > 0 {
			parts = append(parts, "options="+optionsText(src.Options.Raw))
		}
		parts = append(parts, "columns=["+strings.Join(row.Names(), ", ")+"]")
		if src.EventTime >= 0 && src.EventTime < len(row) {
			parts = append(parts, "event-time="+row[src.EventTime].Name, "watermark-delay="+intervalText(src.WatermarkDelay))
		}
		line(parts...)
	}
	outRows := make([]sql.Schema, len(s.Ops))
	rowOf := func(p Port) sql.Schema {
		if p.Op >= 0 {
			return outRows[p.Op]
		}
		if p.Input >= 0 && p.Input < len(rows) {
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
		if !chain {
			from := make([]string, len(op.Inputs))
			for k, p := range op.Inputs {
				from[k] = portText(p)
			}
			parts = append([]string{"#" + strconv.Itoa(i)}, parts...)
			parts = append(parts, "<- "+strings.Join(from, ", "))
		}
		line(parts...)
	}
	if n := s.Exchange; n != nil {
		parts := []string{"Exchange", "topic=" + n.Topic, "keys=[" + strings.Join(n.Texts, ", ") + "]"}
		if n.Queues > 0 {
			parts = append(parts, "queues="+strconv.Itoa(n.Queues))
		}
		if !chain {
			parts = append(parts, "<- "+portText(s.Out))
		}
		line(parts...)
		return
	}
	k := s.Sink
	parts := []string{"Sink"}
	if k.Stream == "" {
		parts = append(parts, "client")
	} else {
		parts = append(parts, k.Stream)
		if k.Connector != "" {
			parts = append(parts, "connector="+k.Connector)
		}
		if len(k.Options.Raw) > 0 {
			parts = append(parts, "options="+optionsText(k.Options.Raw))
		}
	}
	cols := make([]string, len(k.Schema))
	for i, c := range k.Schema {
		cols[i] = c.Name + " " + c.Type.String()
	}
	parts = append(parts, "columns=["+strings.Join(cols, ", ")+"]")
	if len(k.KeyColumns) > 0 {
		keys := make([]string, len(k.KeyColumns))
		for i, c := range k.KeyColumns {
			if c >= 0 && c < len(k.Schema) {
				keys[i] = k.Schema[c].Name
			} else {
				keys[i] = "#" + strconv.Itoa(c)
			}
		}
		parts = append(parts, "key=["+strings.Join(keys, ", ")+"]")
	}
	if k.Changes != AppendOnly {
		parts = append(parts, "changes="+k.Changes.String())
	}
	if !chain {
		parts = append(parts, "<- "+portText(s.Out))
	}
	line(parts...)
}

// isChain reports whether the stage is one input followed by operators one after the other
// (EXPLAIN then lists them in order without naming their inputs).
func (s *Stage) isChain() bool {
	if len(s.Inputs) != 1 {
		return false
	}
	prev := FromInput(0)
	for i, op := range s.Ops {
		if len(op.Inputs) != 1 || op.Inputs[0] != prev {
			return false
		}
		prev = FromOp(i)
	}
	return s.Out == prev
}

func portText(p Port) string {
	if p.Op >= 0 {
		return "#" + strconv.Itoa(p.Op)
	}
	return "input " + strconv.Itoa(p.Input)
}

// nodeText describes a physical node over input rows row; out is the node's output row
// when it differs from its input's.
func nodeText(n Node, row sql.Schema) (parts []string, out sql.Schema) {
	switch n := n.(type) {
	case *FilterNode:
		return []string{"Filter", n.Text}, nil
	case *ProjectNode:
		return []string{"Project", strings.Join(n.Texts, ", ")}, n.Schema
	case *WindowAssignNode:
		return []string{"WindowAssign", windowSpecText(n.Window, row)}, n.Schema
	case *AggregateNode:
		parts := []string{"Aggregate", "keys=[" + strings.Join(n.Texts, ", ") + "]"}
		if n.Window.Kind != WindowNone {
			parts = append(parts, "window="+windowSpecText(n.Window, row))
		}
		aggs := make([]string, len(n.Aggs))
		for i, a := range n.Aggs {
			aggs[i] = a.Text + " " + a.Type.String()
		}
		parts = append(parts, "aggs=["+strings.Join(aggs, ", ")+"]", "emit="+n.Emit.String())
		if n.TTL > 0 {
			parts = append(parts, "state-ttl="+intervalText(n.TTL))
		}
		if n.Retracting {
			parts = append(parts, "retracting")
		}
		if n.Changes != AppendOnly {
			parts = append(parts, "changes="+n.Changes.String())
		}
		return parts, n.Schema
	case *LimitNode:
		parts := []string{"Limit", strconv.FormatInt(n.N, 10)}
		if n.N < 0 {
			parts[1] = "all"
		}
		if n.Offset > 0 {
			parts = append(parts, "offset="+strconv.FormatInt(n.Offset, 10))
		}
		return parts, nil
	case *TopNNode:
		parts := []string{"TopN", strconv.FormatInt(n.N, 10), "mode=" + n.Mode.String(),
			"partition=[" + strings.Join(n.PartitionTexts, ", ") + "]", "order=[" + strings.Join(n.OrderTexts, ", ") + "]"}
		if n.RowNumber >= 0 && n.RowNumber < len(row) {
			parts = append(parts, "row-number="+row[n.RowNumber].Name)
		}
		if n.TTL > 0 {
			parts = append(parts, "state-ttl="+intervalText(n.TTL))
		}
		if n.Latest {
			parts = append(parts, "ties=last-read")
		}
		if n.Retracting {
			parts = append(parts, "retracting")
		}
		if n.AtSource {
			parts = append(parts, "at-source")
		}
		if n.Changes != AppendOnly {
			parts = append(parts, "changes="+n.Changes.String())
			return parts, n.Schema
		}
		return parts, nil
	case *SortNode:
		parts := []string{"Sort", strings.Join(n.Texts, ", ")}
		if n.Changes != AppendOnly && len(n.Texts) == 0 {
			return []string{"Fold", n.Changes.String()}, n.Schema
		}
		if n.Changes != AppendOnly {
			return append(parts, "folding "+n.Changes.String()), n.Schema
		}
		return parts, nil
	case *OverNode:
		parts := []string{n.Text}
		if n.Changes != AppendOnly {
			parts = append(parts, "changes="+n.Changes.String())
			return parts, n.Schema
		}
		return parts, nil
	case *JoinNode:
		return []string{n.Text}, n.Schema
	case *UnionNode:
		return []string{"Union"}, n.Schema
	}
	if d, ok := n.(interface {
		explain(sql.Schema) ([]string, sql.Schema)
	}); ok {
		return d.explain(row)
	}
	return []string{"?"}, nil
}

func optionsText(o map[string]string) string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(o[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func windowSpecText(w WindowSpec, in sql.Schema) string {
	return windowText(sql.Window{Kind: w.Kind, TimeCol: w.Time, EndCol: w.End, Size: w.Size, Slide: w.Slide, Gap: w.Gap}, in)
}
