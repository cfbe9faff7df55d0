package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The web console answers to the Postgres wire's authentication: with scram-sha-256 it
// asks for a user and password (HTTP Basic) and checks them against the same users; its
// SQL box runs as that user, so a read-only user may query but not create, nor pause a
// job from the page. /metrics and /healthz stay open.
func TestConsoleAuthentication(t *testing.T) {
	s := startServerWith(t, "--auth", "scram-sha-256", "--admin-password", "adm")
	if out, err := psqlAs(s.pg, "rsql", "adm", "", "-c", "CREATE USER viewer WITH PASSWORD 'view-pw' READ ONLY",
		"-c", "CREATE STREAM ev (id BIGINT) WITH (queues = 1)", "-c", "CREATE STREAM ev2 AS SELECT id FROM ev"); err != nil {
		t.Fatalf("admin: %v\n%s", err, out)
	}
	call := func(method, path, user, pw, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+s.http+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	sqlBody := func(stmt string) string {
		b, _ := json.Marshal(map[string]string{"sql": stmt})
		return string(b)
	}

	for _, p := range []string{"/", "/api/v1/jobs", "/api/v1/streams"} {
		code, body, h := call("GET", p, "", "", "")
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET %s without a password: %d %q %v", p, code, body, h)
		}
		if code, body, _ := call("GET", p, "rsql", "wrong", ""); code != http.StatusUnauthorized || !strings.Contains(body, "28P01") {
			t.Errorf("GET %s with a wrong password: %d %q", p, code, body)
		}
		if code, body, _ := call("GET", p, "nobody", "adm", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s as an unknown user: %d %q", p, code, body)
		}
		if code, body, _ := call("GET", p, "rsql", "adm", ""); code != http.StatusOK {
			t.Errorf("GET %s as the admin: %d %q", p, code, body)
		}
		if code, body, _ := call("GET", p, "viewer", "view-pw", ""); code != http.StatusOK {
			t.Errorf("GET %s as the read-only user: %d %q", p, code, body)
		}
	}
	for _, p := range []string{"/metrics", "/healthz"} {
		if code, body, _ := call("GET", p, "", "", ""); code != http.StatusOK {
			t.Errorf("GET %s without a password: %d %.200q", p, code, body)
		}
	}
	if code, body, _ := call("POST", "/api/v1/sql", "", "", sqlBody("CREATE STREAM x (a BIGINT)")); code != http.StatusUnauthorized {
		t.Errorf("the SQL box without a password: %d %q", code, body)
	}
	if code, body, _ := call("POST", "/api/v1/sql", "viewer", "view-pw", sqlBody("CREATE STREAM x (a BIGINT)")); !strings.Contains(body, "42501") {
		t.Errorf("CREATE from the SQL box as the read-only user: %d %q", code, body)
	}
	if code, body, _ := call("POST", "/api/v1/sql", "viewer", "view-pw", sqlBody("SHOW STREAMS")); code != http.StatusOK || !strings.Contains(body, "ev2") {
		t.Errorf("SHOW STREAMS from the SQL box as the read-only user: %d %q", code, body)
	}
	if code, body, _ := call("POST", "/api/v1/jobs/job-1/pause", "viewer", "view-pw", ""); code != http.StatusForbidden || !strings.Contains(body, "42501") {
		t.Errorf("pause as the read-only user: %d %q", code, body)
	}
	if code, body, _ := call("POST", "/api/v1/jobs/job-1/pause", "rsql", "adm", ""); code != http.StatusOK || !strings.Contains(body, "PAUSED") {
		t.Errorf("pause as the admin: %d %q", code, body)
	}
	if code, body, _ := call("POST", "/api/v1/sql", "rsql", "adm", sqlBody("CREATE STREAM x (a BIGINT)")); code != http.StatusOK || strings.Contains(body, `"error"`) {
		t.Errorf("CREATE from the SQL box as the admin: %d %q", code, body)
	}
}
