package server

import (
	"encoding/json"
	"testing"
)

// The catalog's JSON keeps a job's state as the word it held when State was a string.
func TestJobStateJSON(t *testing.T) {
	for _, s := range []JobState{JobRunning, JobPaused, JobFinished, JobFailed, JobTerminated} {
		b, err := json.Marshal(JobDef{ID: "job-1", State: s})
		if err != nil {
			t.Fatal(err)
		}
		var raw struct{ State string }
		if err := json.Unmarshal(b, &raw); err != nil || raw.State != s.String() {
			t.Fatalf("%v marshals as %s", s, b)
		}
		var back JobDef
		if err := json.Unmarshal(b, &back); err != nil || back.State != s {
			t.Fatalf("%s reads back as %v (%v)", b, back.State, err)
		}
	}
	var d JobDef
	if err := json.Unmarshal([]byte(`{"id":"job-1","state":"RUNNIN"}`), &d); err == nil {
		t.Fatal("an unknown state word is accepted")
	}
}
