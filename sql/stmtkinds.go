package sql

// The words of statements that name one of a fixed set of things (DROP's object, SHOW's
// list, a job action, a transaction action) are typed here; String gives the upper-case
// word, which is what command tags and messages print.

// DropKind is what a DROP statement drops.
type DropKind uint8

const (
	DropStream DropKind = iota + 1
	DropTable
	DropView // also DROP MATERIALIZED VIEW
	DropFunction
	DropAggregate
)

// String is the object's word as written in DROP: "STREAM", "TABLE", "VIEW", "FUNCTION"
// or "AGGREGATE".
func (k DropKind) String() string {
	switch k {
	case DropStream:
		return "STREAM"
	case DropTable:
		return "TABLE"
	case DropView:
		return "VIEW"
	case DropFunction:
		return "FUNCTION"
	case DropAggregate:
		return "AGGREGATE"
	}
	return "?"
}

// ShowWhat is the list a SHOW statement asks for.
type ShowWhat uint8

const (
	ShowStreams ShowWhat = iota + 1
	ShowViews            // also SHOW MATERIALIZED VIEWS
	ShowJobs
	ShowUnits
	ShowTopics
	ShowFunctions
	ShowUsers
)

// showWhats lists the SHOW nouns in the order the parser tries them.
var showWhats = []ShowWhat{ShowStreams, ShowViews, ShowJobs, ShowUnits, ShowTopics, ShowFunctions, ShowUsers}

// String is the upper-case noun: "STREAMS", "VIEWS", "JOBS", "UNITS", "TOPICS",
// "FUNCTIONS" or "USERS".
func (w ShowWhat) String() string {
	switch w {
	case ShowStreams:
		return "STREAMS"
	case ShowViews:
		return "VIEWS"
	case ShowJobs:
		return "JOBS"
	case ShowUnits:
		return "UNITS"
	case ShowTopics:
		return "TOPICS"
	case ShowFunctions:
		return "FUNCTIONS"
	case ShowUsers:
		return "USERS"
	}
	return "?"
}

// JobAction is what PAUSE / RESUME / TERMINATE JOB asks for.
type JobAction uint8

const (
	JobPause JobAction = iota + 1
	JobResume
	JobTerminate
)

// String is the statement's verb: "PAUSE", "RESUME" or "TERMINATE".
func (a JobAction) String() string {
	switch a {
	case JobPause:
		return "PAUSE"
	case JobResume:
		return "RESUME"
	case JobTerminate:
		return "TERMINATE"
	}
	return "?"
}

// TxAction is the transaction statement, with its synonyms folded: START TRANSACTION is
// TxBegin, END is TxCommit and ABORT is TxRollback.
type TxAction uint8

const (
	TxBegin TxAction = iota + 1
	TxCommit
	TxRollback
)

// String is the command tag's word: "BEGIN", "COMMIT" or "ROLLBACK".
func (a TxAction) String() string {
	switch a {
	case TxBegin:
		return "BEGIN"
	case TxCommit:
		return "COMMIT"
	case TxRollback:
		return "ROLLBACK"
	}
	return "?"
}
