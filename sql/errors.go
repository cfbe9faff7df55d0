package sql

import "fmt"

// SQLSTATE codes of docs/sql.md ("Errors"); codes.go holds the others.
const (
	CodeSyntax        = "42601"
	CodeUnknownTable  = "42P01"
	CodeUnknownColumn = "42703"
	CodeTypeMismatch  = "42804"
	CodeNotSupported  = "0A000"
	CodeDuplicate     = "42710" // an object of that name already exists
	CodeInUse         = "55006" // object in use (DROP of a stream a job reads)
	CodeInvalidValue  = "22023" // invalid parameter value (bad option, bad interval)
	CodeInternal      = "XX000"
)

// Error is a SQL error: a SQLSTATE code, a message, and where in the statement text it is.
// Line and Column are 1-based; 0 means unknown. Pos is the 0-based byte offset in the text
// given to Parse, or -1.
type Error struct {
	Code    string
	Message string
	Line    int
	Column  int
	Pos     int
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s at line %d, column %d", e.Message, e.Line, e.Column)
	}
	return e.Message
}

// Errorf returns an *Error with no position.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Pos: -1}
}
