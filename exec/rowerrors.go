package exec

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"rsql/connectors"
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
	// Offset is the source offset of the row (Line: its line number in a file), -1 when the
	// row is not one record's (an aggregate's, a join's) or the stage does not track it.
	Offset   int64
	Line     bool
	View     bool   // Stream is a materialized view (a pull query's row)
	Operator string // filter, project, aggregate, sink
	Err      *sql.Error
}

func (e *RowError) Error() string {
	if e.View {
		return fmt.Sprintf("view %s: %s: ERROR %s: %s", e.Stream, e.Operator, e.Err.Code, e.Err.Message)
	}
	where := ""
	switch {
	case e.Offset >= 0 && e.Line:
		where = fmt.Sprintf(", line %d", e.Offset)
	case e.Offset >= 0:
		where = fmt.Sprintf(", offset %d", e.Offset)
	}
	return fmt.Sprintf("stream %s, split %s%s: %s: ERROR %s: %s", e.Stream, e.Split, where, e.Operator, e.Err.Code, e.Err.Message)
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
	st *stage
}

// report handles one failed row: row is the operator's input, schema names its columns
// (nil: positional), cause the row's error.
func (b *badRows) report(ctx context.Context, op, split string, row sql.Row, schema sql.Schema, cause *sql.Error) error {
	return b.reportAt(ctx, op, split, -1, row, schema, cause)
}

// reportAt is report of a row whose source offset is known (rowOffset; -1: not known).
func (b *badRows) reportAt(ctx context.Context, op, split string, off int64, row sql.Row, schema sql.Schema, cause *sql.Error) error {
	if b == nil || b.st == nil {
		return &RowError{Split: split, Offset: off, Operator: op, Err: cause}
	}
	src := b.st.rootSource()
	stream := src.Stream
	view := src.Connector == "view"
	if len(b.st.plan.Inputs) != 1 || b.st.plan.Inputs[0].FromStage >= 0 || view || src.Connector == "values" {
		// The offset of a row read from another stage's edge is not its record's, nor is
		// a view's row position (a pull query's).
		off = -1
	}
	rerr := &RowError{Stream: stream, Split: split, Offset: off, Line: src.Connector == "file", View: view, Operator: op, Err: cause}
	if b.st.job.env.FailOnRowError {
		return rerr
	}
	b.st.job.recordBad(rerr)
	dlq := b.st.rootDLQ()
	if dlq == nil {
		return nil
	}
	body, err := json.Marshal(dlqRecord{
		Error:  dlqError{Code: cause.Code, Message: cause.Message, Operator: op},
		Stream: stream, Split: split, Row: rowJSON(row, schema),
	})
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
	Row    json.RawMessage `json:"row"`
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
	case v.K == sql.KindDouble && !math.IsNaN(v.F) && !math.IsInf(v.F, 0):
		return sql.AppendText(b, v)
	case v.K == sql.KindDecimal && v.S != "NaN" && v.S != "Infinity" && v.S != "-Infinity":
		return sql.AppendText(b, v)
	}
	s, _ := json.Marshal(sql.Text(v)) // a Go string always encodes
	return append(b, s...)
}
