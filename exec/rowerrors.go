package exec

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Rows that fail inside the pipeline. An expression that cannot be computed for a row
// (division by zero, overflow, a cast that does not convert: an sql.ErrorValue) and a row a
// sink cannot encode (a DOUBLE infinity in JSON) are PostgreSQL errors of that row. The
// operator that finishes the row (filter, projection, aggregation input, sink) hands it to
// the stage's badRows: the row is dropped, counted as bad (JobStats.Bad), its error kept in
// JobStats.BadErrors and logged, and written to the source stream's dead-letter output
// (dlq_topic / dlq_path) as one JSON object:
//
//	{"error": {"code": "22012", "message": "division by zero", "operator": "project"},
//	 "stream": "orders", "split": "0", "row": {"order_id": 7, ...}}
//
// The job goes on. An operator without badRows (built outside a job) fails the batch with
// the row's error instead.

// RowError is the error of one row an operator could not finish.
type RowError struct {
	Stream, Split string
	// Offset is where the row was read (the line for files: Line), when known
	// (HasOffset): for the rows an operator of the stage that reads the stream fails on
	// as they were read (a filter's, a projection's).
	Offset          int64
	HasOffset, Line bool
	View            bool   // Stream is a materialized view (a pull query's row)
	Operator        string // filter, project, aggregate, sink
	Err             *sql.Error
}

func (e *RowError) Error() string {
	cause := e.Err
	if cause == nil {
		// (An operator that found a row failed without the cause: a bug, named as one.)
		cause = &sql.Error{Code: sql.CodeInternal, Message: "the row failed without a cause"}
	}
	if e.View {
		return fmt.Sprintf("view %s: %s: ERROR %s: %s", e.Stream, e.Operator, cause.Code, cause.Message)
	}
	where := ""
	if e.HasOffset {
		what := "offset"
		if e.Line {
			what = "line"
		}
		where = fmt.Sprintf(", %s %d", what, e.Offset)
	}
	return fmt.Sprintf("stream %s, split %s%s: %s: ERROR %s: %s", e.Stream, e.Split, where, e.Operator, cause.Code, cause.Message)
}

// rowOffset is the source offset of row i of b, -1 when b does not carry offsets.
func rowOffset(b *Batch, i int) int64 {
	if b.Offsets == nil || i >= len(b.Offsets) {
		return -1
	}
	return b.Offsets[i]
}

func (e *RowError) Unwrap() error { return e.Err }

// badRows routes a stage's failed rows to the bad-record path. It is used by the stage's
// goroutine only (operators are single-goroutine); the dead-letter output it writes to is
// shared with the split readers and has its own lock.
type badRows struct {
	st   *stage
	port planner.Port // the rows' port: their stream is the one it was read from
}

// report handles one failed row: row is the operator's input, schema names its columns
// (nil: positional), cause the row's error.
func (b *badRows) report(ctx context.Context, op, split string, row sql.Row, schema sql.Schema, cause *sql.Error) error {
	return b.reportAt(ctx, op, split, -1, row, schema, cause)
}

// reportAt is report of a row whose source offset is known (rowOffset; -1: not known).
func (b *badRows) reportAt(ctx context.Context, op, split string, off int64, row sql.Row, schema sql.Schema, cause *sql.Error) error {
	if b == nil || b.st == nil {
		return &RowError{Split: split, Offset: off, HasOffset: off >= 0, Operator: op, Err: cause}
	}
	src := b.st.rootSource(b.port)
	view := src.Connector == "view"
	rerr := &RowError{Stream: src.Stream, Split: split, View: view, Operator: op, Err: cause}
	if off >= 0 && len(b.st.plan.Inputs) == 1 && b.st.plan.Inputs[0].FromStage < 0 && !view && src.Connector != "values" {
		// (The offset of a row read from another stage's edge is not its record's, nor is
		// a view's row position, a pull query's.)
		rerr.Offset, rerr.HasOffset, rerr.Line = off, true, src.Connector == "file"
	} else if !view {
		rerr.Offset, rerr.HasOffset, rerr.Line = b.st.offsetOf(row)
	}
	if b.st.job.env.FailOnRowError {
		return rerr
	}
	b.st.job.recordBad(rerr)
	dlq := b.st.rootDLQ(b.port)
	if dlq == nil {
		return nil
	}
	rec := dlqRecord{
		Error:  dlqError{Code: cause.Code, Message: cause.Message, Operator: op},
		Stream: src.Stream, Split: split, Row: rowJSON(row, schema),
	}
	if rerr.HasOffset {
		if rerr.Line {
			rec.Line = &rerr.Offset
		} else {
			rec.Offset = &rerr.Offset
		}
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return dlq.write(ctx, connectors.Message{Body: body, Timestamp: nowMillis()})
}

type dlqError struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Operator string `json:"operator"`
}

type dlqRecord struct {
	Error  dlqError        `json:"error"`
	Stream string          `json:"stream"`
	Split  string          `json:"split"`
	Offset *int64          `json:"offset,omitempty"`
	Line   *int64          `json:"line,omitempty"`
	Row    json.RawMessage `json:"row"`
}

// offsetOf finds where row was read when it is one of the rows of the source batch the
// stage is working through (an operator failing on a row as it was read): its offset, and
// whether that is a line number (files). The batch's rows are found by where their values
// start in its storage, which a filter compacting Rows in place does not move. Only called
// for failed rows.
func (st *stage) offsetOf(row sql.Row) (off int64, ok, line bool) {
	b := st.cur
	if b == nil || len(row) == 0 || len(b.offs) != len(b.ends) {
		return 0, false, false
	}
	start := 0
	for i, e := range b.ends {
		if e > start && &b.vals[start] == &row[0] {
			return b.offs[i], true, st.curLine
		}
		start = e
	}
	return 0, false, false
}

// rowJSON renders a row as a JSON object by column name (an array when the names are not
// known): numbers as numbers, NaN/Infinity and timestamps as strings.
func rowJSON(row sql.Row, schema sql.Schema) json.RawMessage {
	var b []byte
	named := len(schema) == len(row)
	if named {
		b = append(b, '{')
	} else {
		b = append(b, '[')
	}
	for i, v := range row {
		if i > 0 {
			b = append(b, ',')
		}
		if named {
			k, _ := json.Marshal(schema[i].Name) // a Go string always encodes
			b = append(b, k...)
			b = append(b, ':')
		}
		b = appendJSONValue(b, v)
	}
	if named {
		b = append(b, '}')
	} else {
		b = append(b, ']')
	}
	return b
}

func appendJSONValue(b []byte, v sql.Value) []byte {
	switch {
	case v.IsNull():
		return append(b, "null"...)
	case v.K == sql.KindJSON:
		if json.Valid([]byte(v.S)) {
			return append(b, v.S...)
		}
	case v.K == sql.KindBool, v.K == sql.KindInt, v.K == sql.KindBigInt:
		if v.K == sql.KindBool {
			if v.I != 0 {
				return append(b, "true"...)
			}
			return append(b, "false"...)
		}
		return sql.AppendText(b, v)
	case v.K == sql.KindDouble && !math.IsNaN(v.F()) && !math.IsInf(v.F(), 0):
		return sql.AppendText(b, v)
	case v.K == sql.KindDecimal && v.S != "NaN" && v.S != "Infinity" && v.S != "-Infinity":
		return sql.AppendText(b, v)
	}
	s, _ := json.Marshal(sql.Text(v)) // a Go string always encodes
	return append(b, s...)
}
