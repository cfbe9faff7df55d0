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
	src := s.Source
	row := make(sql.Schema, 0, len(src.Columns))
	for _, c := range src.Columns {
		if c >= 0 && c < len(src.Schema) {
			row = append(row, src.Schema[c])
		} else {
			row = append(row, sql.Column{Name: "#" + strconv.Itoa(c)})
		}
	}
	parts := []string{"Source", src.Stream}
	if src.FromStage >= 0 {
		parts = append(parts, "from-stage="+strconv.Itoa(src.FromStage))
	}
	parts = append(parts, "connector="+src.Connector)
	if len(src.Options) > 0 {
		parts = append(parts, "options="+optionsText(src.Options))
	}
	parts = append(parts, "columns=["+strings.Join(row.Names(), ", ")+"]")
	if src.EventTime >= 0 && src.EventTime < len(row) {
		parts = append(parts, "event-time="+row[src.EventTime].Name, "watermark-delay="+intervalText(src.WatermarkDelay))
	}
	line(parts...)
	for _, n := range s.Pipeline {
		switch n := n.(type) {
		case *FilterNode:
			line("Filter", n.Text)
		case *ProjectNode:
			line("Project", strings.Join(n.Texts, ", "))
			row = n.Schema
		case *WindowAssignNode:
			line("WindowAssign", windowSpecText(n.Window, row))
			row = n.Schema
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
			line(parts...)
			row = n.Schema
		case *ExchangeNode:
			parts := []string{"Exchange", "topic=" + n.Topic, "keys=[" + strings.Join(n.Texts, ", ") + "]"}
			if n.Queues > 0 {
				parts = append(parts, "queues="+strconv.Itoa(n.Queues))
			}
			line(parts...)
		case *LimitNode:
			line("Limit", strconv.FormatInt(n.N, 10))
		default:
			line("?")
		}
	}
	if isExchangeStage(s) {
		return
	}
	k := s.Sink
	parts = []string{"Sink"}
	if k.Stream == "" {
		parts = append(parts, "client")
	} else {
		parts = append(parts, k.Stream)
		if k.Connector != "" {
			parts = append(parts, "connector="+k.Connector)
		}
		if len(k.Options) > 0 {
			parts = append(parts, "options="+optionsText(k.Options))
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
	line(parts...)
}

func isExchangeStage(s *Stage) bool {
	if len(s.Pipeline) == 0 {
		return false
	}
	_, ok := s.Pipeline[len(s.Pipeline)-1].(*ExchangeNode)
	return ok
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
	kind := sql.WindowKind(0)
	switch w.Kind {
	case WindowTumble:
		kind = sql.WindowTumble
	case WindowHop:
		kind = sql.WindowHop
	case WindowSession:
		kind = sql.WindowSession
	}
	return windowText(sql.Window{Kind: kind, TimeCol: w.Time, Size: w.Size, Slide: w.Slide, Gap: w.Gap}, in)
}
