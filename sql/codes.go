package sql

// SQLSTATE codes beyond those of errors.go.
const (
	CodeGrouping           = "42803" // a column outside GROUP BY, an aggregate where none may be
	CodeDuplicateColumn    = "42701" // a column declared or listed twice
	CodeUndefinedParameter = "42P02" // $n without a value
	CodeInvalidText        = "22P02" // text that does not convert to the type (CAST, INSERT VALUES)
	CodeOutOfRange         = "22003" // a number out of the target type's range
	CodeCannotCoerce       = "42846" // a kind that does not convert to the type at all
	CodeInvalidName        = "42602" // a name that breaks a naming rule (topic names)
	CodeWrongObjectType    = "42809" // a stream named where a view is meant, or the reverse
)
