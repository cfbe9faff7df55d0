package connectors

import "rsql/sql"

// Format turns message bodies into rows of a fixed schema and back. A Format is bound to
// its schema when made (NewFormat) and is not safe for concurrent use: whoever decodes or
// encodes (a split reader, a sink) makes its own.
type Format interface {
	// Decode parses body into row (reusing row's storage when it has the capacity) and
	// returns it. A body that does not fit the schema returns a *DecodeError.
	Decode(body []byte, row sql.Row) (sql.Row, error)
	// Encode appends the encoding of row to dst.
	Encode(dst []byte, row sql.Row) ([]byte, error)
}

// DecodeError says which field of a record could not be decoded and why.
type DecodeError struct {
	Field  string // empty when the record as a whole is malformed
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + e.Field + ": " + e.Reason
}

// changeColumn is the index of schema's change column (sql.ChangeColumn as its last
// column: the rows of an updating query, the records of a table), or -1.
func changeColumn(schema sql.Schema) int {
	if n := len(schema); n > 0 && schema[n-1].Name == sql.ChangeColumn {
		return n - 1
	}
	return -1
}
