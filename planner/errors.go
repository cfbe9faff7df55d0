package planner

import (
	"errors"
	"fmt"

	"rsql/sql"
)

// Errors of the planner are *sql.Error values (so a client sees a SQLSTATE code): the query
// needs something the planner does not support (sql.CodeNotSupported), an invalid window
// (sql.CodeInvalidValue), or a bound query that breaks the row-layout contract of sql.Query
// (sql.CodeInternal). Match them with errors.As.

func errorf(code, format string, args ...any) error {
	return sql.Errorf(code, "planner: "+format, args...)
}

// wrapf prefixes err's message with context, keeping its SQLSTATE code.
func wrapf(err error, format string, args ...any) error {
	ctx := fmt.Sprintf(format, args...)
	var se *sql.Error
	if errors.As(err, &se) {
		c := *se
		c.Message = "planner: " + ctx + ": " + se.Message
		return &c
	}
	return fmt.Errorf("planner: %s: %w", ctx, err)
}

func asSQLError(err error, target **sql.Error) bool { return errors.As(err, target) }
