package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"rsql/server/pgwire"
	"rsql/sql"
)

// POST /api/v1/sql runs statements through the engine, as the Postgres wire does, in a
// session of their own, and streams what they give as JSON lines (docs/operations.md):
//
//	{"type":"columns","result":0,"columns":[{"name":..,"type":..}],"push":true}
//	{"type":"row","result":0,"values":[...]}
//	{"type":"notice","result":0,"severity":..,"code":..,"message":..}
//	{"type":"complete","result":0,"tag":"SELECT 3","rows":3,"stopped":false}
//	{"type":"error","code":"42601","message":..,"position":12,"line":1,"column":12}
//
// A push query's rows are written as they arrive until it ends, max_rows rows were sent
// (then it is stopped: "stopped":true), or the client goes away (closing the request
// stops it). The first error ends the answer; when nothing was written before it, the
// status is 400 (or 500 for an internal error).

type sqlRequest struct {
	SQL string `json:"sql"`
	// MaxRows stops each result after this many rows (0: no limit).
	MaxRows int64 `json:"max_rows"`
}

// maxSQLBody bounds the request body.
const maxSQLBody = 1 << 20

type sqlEvent struct {
	Type     string       `json:"type"`
	Result   int          `json:"result"`
	Columns  []columnJSON `json:"columns,omitempty"`
	Push     bool         `json:"push,omitempty"`
	Values   []any        `json:"values,omitempty"`
	Tag      string       `json:"tag,omitempty"`
	Rows     *int64       `json:"rows,omitempty"`
	Stopped  bool         `json:"stopped,omitempty"`
	Severity string       `json:"severity,omitempty"`
	*apiErr
}

func (c *console) runSQL(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		apiError(w, http.StatusUnsupportedMediaType, "", `POST /api/v1/sql takes a JSON body {"sql": "..."} with Content-Type: application/json`)
		return
	}
	var req sqlRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSQLBody))
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "", `the body is not {"sql": "...", "max_rows": N}: `+err.Error())
		return
	}
	if strings.TrimSpace(req.SQL) == "" || req.MaxRows < 0 {
		apiError(w, http.StatusBadRequest, "", `the body needs "sql" (statements) and, if given, a "max_rows" of 0 or more`)
		return
	}
	ctx := r.Context()
	sess := pgwire.NewSession()
	u := consoleUser(ctx)
	sess.User, sess.Role = u.Name, u.Role
	results, err := c.e.Execute(ctx, sess, req.SQL, nil)
	defer func() {
		for _, res := range results {
			if res.Rows != nil {
				res.Rows.Close()
			}
		}
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	if len(results) == 0 && err != nil {
		status := http.StatusBadRequest
		if e := sqlErr(err, req.SQL); e.Code == sql.CodeInternal {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
	}
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	send := func(ev sqlEvent, flush bool) bool {
		if enc.Encode(ev) != nil {
			return false
		}
		if flush {
			return rc.Flush() == nil
		}
		return true
	}
	for i, res := range results {
		if res.Notice != nil {
			n := res.Notice
			if !send(sqlEvent{Type: "notice", Result: i, Severity: n.Severity, apiErr: &apiErr{Code: n.Code, Message: n.Message}}, false) {
				return
			}
		}
		if res.Columns == nil {
			if !send(sqlEvent{Type: "complete", Result: i, Tag: pgwire.CommandTag(res, 0)}, false) {
				return
			}
			continue
		}
		if !send(sqlEvent{Type: "columns", Result: i, Columns: columnsJSON(res.Columns), Push: res.Push}, true) {
			return
		}
		n, stopped, rerr := c.streamRows(ctx, res, i, req.MaxRows, send)
		if rerr != nil {
			if ctx.Err() == nil {
				send(sqlEvent{Type: "error", Result: i, apiErr: ptr(sqlErr(rerr, req.SQL))}, true)
			}
			return
		}
		if !send(sqlEvent{Type: "complete", Result: i, Tag: pgwire.CommandTag(res, n), Rows: &n, Stopped: stopped}, true) {
			return
		}
	}
	if err != nil {
		send(sqlEvent{Type: "error", Result: len(results), apiErr: ptr(sqlErr(err, req.SQL))}, true)
		return
	}
	rc.Flush()
}

// streamRows sends a result's rows as they come, flushing whenever no further row is
// waiting. It returns how many it sent and whether it stopped the result at maxRows.
func (c *console) streamRows(ctx context.Context, res *pgwire.Result, i int, maxRows int64, send func(sqlEvent, bool) bool) (n int64, stopped bool, err error) {
	rctx, cancel := context.WithCancel(ctx)
	type next struct {
		row sql.Row
		err error
	}
	ch := make(chan next, 64)
	go func() {
		defer close(ch)
		for {
			row, err := res.Rows.Next(rctx)
			select {
			case ch <- next{row, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range ch {
		}
	}()
	for {
		var nx next
		select {
		case nx = <-ch:
		case <-ctx.Done():
			return n, false, ctx.Err()
		}
		if errors.Is(nx.err, io.EOF) {
			return n, false, nil
		}
		if nx.err != nil {
			return n, false, nx.err
		}
		vals := make([]any, len(nx.row))
		for k, v := range nx.row {
			t := sql.Type{Kind: v.K}
			if k < len(res.Columns) {
				t = res.Columns[k].Type
			}
			vals[k] = jsonValue(v, t)
		}
		n++
		if !send(sqlEvent{Type: "row", Result: i, Values: vals}, len(ch) == 0) {
			return n, false, context.Canceled
		}
		if maxRows > 0 && n >= maxRows {
			return n, true, nil
		}
	}
}
