package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"rsql/server/auth"
)

// Under trust the console serves loopback clients only, as the wire does; the request's
// user is the admin. (The scram-sha-256 side is tested end to end: TestConsoleAuthentication.)
func TestConsoleTrustServesLoopbackOnly(t *testing.T) {
	var seen []auth.UserDef
	a := &consoleAuth{method: auth.Trust, next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, consoleUser(r.Context()))
	})}
	for _, c := range []struct {
		remote string
		code   int
	}{
		{"127.0.0.1:5000", 200}, {"[::1]:5000", 200}, {"[::ffff:127.0.0.1]:5000", 200},
		{"10.1.2.3:5000", 403}, {"[2001:db8::1]:5000", 403}, {"garbage", 403},
	} {
		req := httptest.NewRequest("GET", "/api/v1/jobs", nil)
		req.RemoteAddr = c.remote
		w := httptest.NewRecorder()
		a.ServeHTTP(w, req)
		if w.Code != c.code {
			t.Errorf("%s: %d, want %d", c.remote, w.Code, c.code)
		}
		if c.code == 403 && !strings.Contains(w.Body.String(), "--auth scram-sha-256") {
			t.Errorf("%s: the refusal does not say what to do: %s", c.remote, w.Body.String())
		}
	}
	if len(seen) != 3 || seen[0].Role != auth.RoleAdmin {
		t.Errorf("users seen by the console: %v", seen)
	}
}

// A password is checked against the user's SCRAM secret; a login once checked is
// remembered, and a changed password is checked again.
func TestConsoleSCRAMCheck(t *testing.T) {
	secret, err := auth.NewSecret("right")
	if err != nil {
		t.Fatal(err)
	}
	users := fixedUsers{"ann": {Name: "ann", Role: auth.RoleReadOnly, Secret: secret}}
	a := &consoleAuth{method: auth.SCRAM, users: users}
	if u, ok := a.check("ann", "right"); !ok || u.Role != auth.RoleReadOnly {
		t.Fatalf("the right password: %v %v", u, ok)
	}
	for _, c := range [][2]string{{"ann", "wrong"}, {"ann", ""}, {"bob", "right"}, {"ann", "right "}} {
		if _, ok := a.check(c[0], c[1]); ok {
			t.Errorf("%q with %q accepted", c[0], c[1])
		}
	}
	if _, ok := a.check("ann", "right"); !ok {
		t.Error("the right password refused the second time")
	}
	secret2, _ := auth.NewSecret("new")
	users["ann"] = auth.UserDef{Name: "ann", Role: auth.RoleReadOnly, Secret: secret2}
	if _, ok := a.check("ann", "right"); ok {
		t.Error("the old password is still accepted after it changed")
	}
	if _, ok := a.check("ann", "new"); !ok {
		t.Error("the new password refused")
	}
}

// fixedUsers is a UserStore of fixed users.
type fixedUsers map[string]auth.UserDef

func (u fixedUsers) User(name string) (auth.UserDef, bool) {
	d, ok := u[name]
	return d, ok
}
