package sql

// SQLSTATE codes beyond those of errors.go.
const (
	CodeGrouping           = "42803" // a column outside GROUP BY, an aggregate where none may be
	CodeDuplicateColumn    = "42701" // a column declared or listed twice
	CodeUndefinedParameter = "42P02" // $n without a value

	CodeUndefinedFunction = "42883" // no function of that name takes these argument types
	CodeAmbiguousColumn   = "42702" // a column name two relations of a join have
	// CodeInvalidColumnReference: ORDER BY of SELECT DISTINCT not in the select list.
	CodeInvalidColumnReference = "42P10"

	// Data exceptions: the row's value cannot be computed (run-time errors; see ErrorValue).
	CodeNumericOutOfRange    = "22003" // a number too large for its type
	CodeDivisionByZero       = "22012"
	CodeInvalidFrameOffset   = "22013" // a negative or NULL ROWS frame offset
	CodeInvalidText          = "22P02" // text that is not a value of the target type
	CodeSubstringError       = "22011" // a negative SUBSTRING length
	CodeInvalidEscape        = "22025" // a LIKE pattern ending in its escape character
	CodeDatetimeOverflow     = "22008" // a timestamp outside years 1-9999, a bad date field
	CodeInvalidLogArgument   = "2201E" // LN/LOG of zero or a negative number
	CodeInvalidPowerArgument = "2201F" // POWER(0, negative), POWER(negative, fraction)
	CodeInvalidRegex         = "2201B"
	CodeStringDataRight      = "22001" // a value too long for its type
	CodeInvalidParameter     = "22023" // an argument out of its domain (REPEAT, CHR, SPLIT_PART)
	CodeInvalidJSON          = "22032" // text that is not JSON
	CodeNullNotAllowed       = "22004"
	CodeInvalidDatetime      = "22007" // text that is not a timestamp
	CodeUntranslatable       = "22021" // a character that cannot be represented (CHR(0))
	CodeOutOfRange           = CodeNumericOutOfRange
	CodeCannotCoerce         = "42846" // a kind that does not convert to the type at all
	CodeInvalidName          = "42602" // a name that breaks a naming rule (topic names)
	CodeWrongObjectType      = "42809" // a stream named where a view is meant, or the reverse

	// User-defined functions.
	CodeDuplicateFunction = "42723" // a function of that name exists (or is built in)
	CodeExternalRoutine   = "38000" // a user function's code failed: it threw, trapped, or returned a bad value
	CodeQueryCanceled     = "57014" // a user function's call ran past its time limit
	CodeOutOfMemory       = "53200" // a user function's call exceeded its memory limit
	CodeTooComplex        = "54001" // a statement too long, an expression too deep or too large, SQL functions nested too deeply

	CodeUndefinedFile = "58P01" // a file a stream reads does not exist
)
