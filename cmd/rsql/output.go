package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"rsql/connectors"
	"rsql/server"
	"rsql/sql"
)

// printer writes statement results as an aligned table or as JSON lines, and notices on
// its err writer.
type printer struct {
	w    *bufio.Writer
	err  io.Writer
	json bool
}

func newPrinter(w io.Writer, jsonLines bool) *printer {
	return &printer{w: bufio.NewWriter(w), err: os.Stderr, json: jsonLines}
}

// notice prints a statement's notice ("NOTICE: ..." or "WARNING: ...") on p.err.
func (p *printer) notice(n *server.Notice) {
	if n != nil {
		fmt.Fprintf(p.err, "%s: %s\n", n.Severity, n.Message)
	}
}

// Streaming says when a result's rows print as they arrive instead of as one table sized
// from all of them: at once (push queries), never (finished results), or once they have
// not all arrived within a moment (a remote result that may be either).
type streaming time.Duration

const (
	streamNow   streaming = 0
	streamNever streaming = -1
	// streamAfter is how long a remote result may take to arrive whole before it is printed
	// as it comes.
	streamAfter = streaming(150 * time.Millisecond)
)

// result prints one statement result: its rows, or its command tag. A push query's header
// prints at once and each row as it arrives; other results print as a table whose columns
// are as wide as their widest value.
func (p *printer) result(ctx context.Context, r *server.Result) error {
	mode := streamNever
	if r.Push {
		// A push query over files ends within a moment and prints as one table; one over a
		// topic prints its header once the moment has passed, and its rows as they come.
		mode = streamAfter
	}
	return p.resultMode(ctx, r, mode)
}

// rowOrEnd is a row read ahead of printing, or the end of the rows (err, io.EOF at the end).
type rowOrEnd struct {
	row sql.Row
	err error
}

func (p *printer) resultMode(ctx context.Context, r *server.Result, mode streaming) error {
	defer p.w.Flush()
	p.notice(r.Notice)
	if r.Columns == nil {
		if !p.json {
			fmt.Fprintln(p.w, r.Tag)
		}
		return nil
	}
	// Rows are read on their own goroutine, so the header can print while none has come.
	// On the way out the reader is stopped and waited for before the rows are closed.
	ch := make(chan rowOrEnd, 64)
	rctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for range ch {
		}
		r.Rows.Close()
	}()
	go func() {
		defer close(ch)
		for {
			row, err := r.Rows.Next(rctx)
			if err == nil {
				row = append(sql.Row(nil), row...)
			}
			select {
			case ch <- rowOrEnd{row, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var held []sql.Row // rows not printed yet (table mode)
	var timer <-chan time.Time
	if mode > 0 {
		t := time.NewTimer(time.Duration(mode))
		defer t.Stop()
		timer = t.C
	}
	var tw *tableWriter // set once rows print as they come
	var enc connectors.Format
	var buf []byte
	count := 0
	stream := func() {
		tw = newTableWriter(p.w, r.Columns, held)
		tw.fitTypes(r.Columns)
		tw.rehead = true
		tw.header()
		for _, h := range held {
			tw.row(h)
		}
		held = nil
		p.w.Flush()
	}
	if mode == streamNow && !p.json {
		stream()
	}
	// A push query's notice while it runs (that it waits for new records) goes to p.err.
	var notices <-chan *server.Notice
	if nr, ok := r.Rows.(server.NoticeRows); ok {
		notices = nr.Notices()
	}
	for {
		var it rowOrEnd
		var ok bool
		select {
		case n, open := <-notices:
			if !open {
				notices = nil
			}
			p.w.Flush()
			p.notice(n)
			continue
		case it, ok = <-ch:
		case <-timer:
			timer = nil
			if !p.json {
				stream()
			}
			continue
		}
		if !ok || errors.Is(it.err, io.EOF) {
			break
		}
		if it.err != nil {
			return it.err
		}
		count++
		switch {
		case p.json:
			var err error
			if enc == nil {
				if enc, err = connectors.NewFormat("json", r.Columns); err != nil {
					return err
				}
			}
			if buf, err = enc.Encode(buf[:0], it.row); err != nil {
				// A value a stream's JSON cannot hold (Infinity, a year past 9999) is shown
				// anyway, as PostgreSQL's text in a string.
				buf = appendLenientJSON(buf[:0], r.Columns, it.row)
			}
			p.w.Write(buf)
			p.w.WriteByte('\n')
			if mode != streamNever {
				p.w.Flush()
			}
		case tw != nil:
			tw.row(it.row)
			p.w.Flush()
		default:
			held = append(held, it.row)
		}
	}
	if !p.json {
		if tw == nil {
			tw = newTableWriter(p.w, r.Columns, held)
			tw.header()
			for _, h := range held {
				tw.row(h)
			}
		}
		if count == 1 {
			fmt.Fprintln(p.w, "(1 row)")
		} else {
			fmt.Fprintf(p.w, "(%d rows)\n", count)
		}
	}
	return nil
}

// tableWriter prints rows aligned under their column names, psql style: numbers right-
// aligned, a cell holding line breaks over several lines with a '+' after each line but
// its last. Widths come from the names and the rows given to newTableWriter; with rehead
// (rows printed as they arrive), a later, wider value widens its column and the header
// prints again above its row, so every row lines up under the header above it.
type tableWriter struct {
	w      *bufio.Writer
	names  []string
	widths []int
	right  func(i int) bool
	rehead bool
}

func newTableWriter(w *bufio.Writer, cols sql.Schema, rows []sql.Row) *tableWriter {
	texts := make([][]string, len(rows))
	for i, r := range rows {
		texts[i] = cellTexts(r)
	}
	return newTextTable(w, cols.Names(), texts, func(i int) bool { return cols[i].Type.Kind.IsNumeric() })
}

// newTextTable is a tableWriter over text cells.
func newTextTable(w *bufio.Writer, names []string, rows [][]string, right func(int) bool) *tableWriter {
	t := &tableWriter{w: w, names: names, widths: make([]int, len(names)), right: right}
	for i, n := range names {
		t.widths[i] = cellWidth(n)
	}
	for _, r := range rows {
		for i, s := range r {
			if i < len(t.widths) {
				t.widths[i] = max(t.widths[i], cellWidth(s))
			}
		}
	}
	return t
}

// fitTypes widens TIMESTAMP columns to the width of a timestamp with milliseconds (the
// widest of years 1-9999), so rows printed as they arrive line up under the first header.
func (t *tableWriter) fitTypes(cols sql.Schema) {
	for i, c := range cols {
		if i >= len(t.widths) {
			break
		}
		switch c.Type.Kind {
		case sql.KindTimestamp:
			t.widths[i] = max(t.widths[i], len("2006-01-02 15:04:05.000"))
		}
	}
}

// cellWidth is the width of a cell's widest line.
func cellWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, utf8.RuneCountInString(l))
	}
	return w
}

func (t *tableWriter) header() {
	t.line(t.names, func(int) bool { return false })
	for i := range t.names {
		if i > 0 {
			t.w.WriteString("+")
		}
		t.w.WriteString(strings.Repeat("-", t.widths[i]+2))
	}
	t.w.WriteString("\n")
}

func (t *tableWriter) row(r sql.Row) {
	cells := cellTexts(r)
	if t.rehead {
		wider := false
		for i, c := range cells {
			if i < len(t.widths) {
				if w := cellWidth(c); w > t.widths[i] {
					t.widths[i], wider = w, true
				}
			}
		}
		if wider {
			t.header()
		}
	}
	t.line(cells, t.right)
}

// line prints one row; a cell with line breaks continues on the next lines, the other
// cells blank there.
func (t *tableWriter) line(cells []string, right func(int) bool) {
	parts := make([][]string, len(cells))
	height := 1
	for i, s := range cells {
		parts[i] = strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
		height = max(height, len(parts[i]))
	}
	for k := 0; k < height; k++ {
		for i := range cells {
			if i > 0 {
				t.w.WriteString("|")
			}
			t.w.WriteString(" ")
			s := ""
			if k < len(parts[i]) {
				s = parts[i][k]
			}
			w := 0
			if i < len(t.widths) {
				w = t.widths[i]
			}
			pad := strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s)))
			if right(i) {
				t.w.WriteString(pad + s)
			} else {
				t.w.WriteString(s + pad)
			}
			switch {
			case k < len(parts[i])-1:
				t.w.WriteString("+")
			case i < len(cells)-1:
				t.w.WriteString(" ")
			}
		}
		t.w.WriteString("\n")
	}
}

// cellTexts are a row's values as psql prints them: PostgreSQL's text of each value
// (sql.Text: DOUBLE in its shortest exact digits, TIMESTAMP as 2026-12-01 10:00:04.5,
// BOOLEAN as t or f), NULL as nothing.
func cellTexts(row sql.Row) []string {
	out := make([]string, len(row))
	for i, v := range row {
		if v.IsNull() {
			out[i] = ""
		} else {
			out[i] = sql.Text(v)
		}
	}
	return out
}

// appendLenientJSON renders row as a JSON object for display when a stream's JSON format
// cannot encode it: numbers as numbers, booleans, NULL as null, a JSON value as itself, a
// TIMESTAMP of years 1-9999 as the JSON format writes it (ISO 8601 UTC with milliseconds),
// and everything else (NaN, Infinity, other years, intervals, text) as a string holding
// PostgreSQL's text.
func appendLenientJSON(b []byte, cols sql.Schema, row sql.Row) []byte {
	b = append(b, '{')
	for i, v := range row {
		if i > 0 {
			b = append(b, ',')
		}
		name := fmt.Sprint(i)
		if i < len(cols) {
			name = cols[i].Name
		}
		k, _ := json.Marshal(name) // a Go string always encodes
		b = append(append(b, k...), ':')
		switch {
		case v.IsNull():
			b = append(b, "null"...)
			continue
		case v.K == sql.KindBool:
			b = strconv.AppendBool(b, v.I != 0)
			continue
		case v.K == sql.KindInt || v.K == sql.KindBigInt:
			b = strconv.AppendInt(b, v.I, 10)
			continue
		case v.K == sql.KindDouble && !math.IsNaN(v.F()) && !math.IsInf(v.F(), 0):
			b = sql.AppendFloat8(b, v.F())
			continue
		case v.K == sql.KindJSON && json.Valid([]byte(v.S)):
			b = append(b, v.S...)
			continue
		case v.K == sql.KindTimestamp:
			if t := time.UnixMilli(v.I).UTC(); t.Year() >= 1 && t.Year() <= 9999 {
				b = t.AppendFormat(append(b, '"'), "2006-01-02T15:04:05.000Z")
				b = append(b, '"')
				continue
			}
		}
		s, _ := json.Marshal(sql.Text(v)) // a Go string always encodes
		b = append(b, s...)
	}
	return append(b, '}')
}
