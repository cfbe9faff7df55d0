package server

import "fmt"

// JobState is a job's desired state as the catalog stores it. The catalog's JSON holds
// the upper-case word (String); SHOW JOBS and the console print the same word.
type JobState uint8

const (
	JobRunning JobState = iota + 1
	JobPaused
	JobFinished
	JobFailed
	JobTerminated
)

var jobStateText = [...]string{JobRunning: "RUNNING", JobPaused: "PAUSED", JobFinished: "FINISHED",
	JobFailed: "FAILED", JobTerminated: "TERMINATED"}

// String is the state's word: RUNNING, PAUSED, FINISHED, FAILED or TERMINATED.
func (s JobState) String() string {
	if s > 0 && int(s) < len(jobStateText) {
		return jobStateText[s]
	}
	return fmt.Sprintf("JobState(%d)", uint8(s))
}

// MarshalText writes the state's word, which keeps the catalog's JSON as it was when the
// state was a string.
func (s JobState) MarshalText() ([]byte, error) {
	if s == 0 || int(s) >= len(jobStateText) {
		return nil, fmt.Errorf("job state %d has no name", uint8(s))
	}
	return []byte(jobStateText[s]), nil
}

// UnmarshalText reads a state's word; a word that is not one is an error that names it.
func (s *JobState) UnmarshalText(b []byte) error {
	for i, w := range jobStateText {
		if i > 0 && w == string(b) {
			*s = JobState(i)
			return nil
		}
	}
	return fmt.Errorf("unknown job state %q", b)
}
