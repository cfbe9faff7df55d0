package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"rsql/connectors"
	"rsql/server"
	"rsql/sql"
)

// printer writes statement results as an aligned table or as JSON lines.
type printer struct {
	w    *bufio.Writer
	json bool
}

func newPrinter(w io.Writer, jsonLines bool) *printer {
	return &printer{w: bufio.NewWriter(w), json: jsonLines}
}

// result prints one statement result: its rows, or its command tag. Push queries print each
// row as it arrives.
func (p *printer) result(ctx context.Context, r *server.Result) error {
	defer p.w.Flush()
	if r.Columns == nil {
		if !p.json {
			fmt.Fprintln(p.w, r.Tag)
		}
		return nil
	}
	defer r.Rows.Close()
	var rows []sql.Row
	var enc connectors.Format
	var buf []byte
	var pushWidths []int
	for {
		row, err := r.Rows.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if p.json {
			if enc == nil {
				if enc, err = connectors.NewFormat("json", r.Columns); err != nil {
					return err
				}
			}
			if buf, err = enc.Encode(buf[:0], row); err != nil {
				return err
			}
			p.w.Write(buf)
			p.w.WriteByte('\n')
			if r.Push {
				p.w.Flush()
			}
			continue
		}
		if r.Push {
			// Rows print as they arrive, aligned to widths fixed by the header and the
			// first row (a wider later value widens only its own line).
			cells := cellTexts(row)
			if pushWidths == nil {
				pushWidths = columnWidths(r.Columns, [][]string{cells})
				p.header(r.Columns, pushWidths)
			}
			p.line(pushWidths, cells, func(i int) bool { return r.Columns[i].Type.Kind.IsNumeric() })
			p.w.Flush()
			rows = append(rows, nil)
			continue
		}
		rows = append(rows, append(sql.Row(nil), row...))
	}
	if !p.json && !r.Push {
		p.table(r.Columns, rows)
	}
	if !p.json && r.Push && pushWidths == nil {
		p.header(r.Columns, columnWidths(r.Columns, nil))
	}
	if !p.json {
		n := len(rows)
		if n == 1 {
			fmt.Fprintln(p.w, "(1 row)")
		} else {
			fmt.Fprintf(p.w, "(%d rows)\n", n)
		}
	}
	return nil
}

func cellTexts(row sql.Row) []string {
	out := make([]string, len(row))
	for i, v := range row {
		if v.IsNull() {
			out[i] = ""
		} else {
			out[i] = v.String()
		}
	}
	return out
}

// columnWidths is the width of each column: its name or its widest text.
func columnWidths(cols sql.Schema, texts [][]string) []int {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = utf8.RuneCountInString(c.Name)
	}
	for _, t := range texts {
		for i, s := range t {
			if n := utf8.RuneCountInString(s); i < len(widths) && n > widths[i] {
				widths[i] = n
			}
		}
	}
	return widths
}

// line prints one row of cells padded to widths, right-aligned where right says so.
func (p *printer) line(widths []int, cells []string, right func(i int) bool) {
	for i, s := range cells {
		if i > 0 {
			p.w.WriteString(" | ")
		} else {
			p.w.WriteString(" ")
		}
		w := 0
		if i < len(widths) {
			w = widths[i]
		}
		pad := strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s)))
		if right(i) {
			p.w.WriteString(pad + s)
		} else {
			p.w.WriteString(s + pad)
		}
	}
	p.w.WriteString("\n")
}

// header prints the column names and the rule under them.
func (p *printer) header(cols sql.Schema, widths []int) {
	p.line(widths, cols.Names(), func(int) bool { return false })
	for i := range cols {
		if i > 0 {
			p.w.WriteString("+")
		}
		p.w.WriteString(strings.Repeat("-", widths[i]+2))
	}
	p.w.WriteString("\n")
}

// table prints rows aligned under their column names, psql style.
func (p *printer) table(cols sql.Schema, rows []sql.Row) {
	texts := make([][]string, len(rows))
	for r, row := range rows {
		texts[r] = cellTexts(row)
	}
	widths := columnWidths(cols, texts)
	p.header(cols, widths)
	for _, t := range texts {
		p.line(widths, t, func(i int) bool { return cols[i].Type.Kind.IsNumeric() })
	}
}
