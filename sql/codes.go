package sql

// SQLSTATE codes beyond those of errors.go.
const (
	CodeGrouping           = "42803" // a column outside GROUP BY, an aggregate where none may be
	CodeDuplicateColumn    = "42701" // a column declared or listed twice
	CodeUndefinedParameter = "42P02" // $n without a value
)
