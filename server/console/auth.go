package console

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"rsql/internal/listen"
	"rsql/server/auth"
	"rsql/server/pgwire"
)

// consoleAuth guards the web console and its API with the authentication of the Postgres
// wire (docs/security.md, "The web console"):
//   - trust: as on the wire, only loopback clients are served, as the admin;
//   - scram-sha-256: HTTP Basic authentication with a user's name and password, checked
//     against the user's SCRAM secret in the catalog; the session runs with the user's
//     role, so a read-only user can look and query but not pause, resume or terminate.
//
// /metrics and /healthz are not behind it (System serves them beside it).
type consoleAuth struct {
	method auth.Method
	users  auth.UserStore
	next   http.Handler

	// Checking a password costs the secret's PBKDF2 iterations (4,096 by default, about a
	// millisecond), and a page asks several times a second: a login checked once is
	// remembered for consoleLoginTTL, by a hash of the user, the password and the secret
	// (so a changed password or secret needs checking again).
	mu     sync.Mutex
	logins map[[sha256.Size]byte]consoleLogin
}

type consoleLogin struct {
	user    auth.UserDef
	expires time.Time
}

const (
	consoleLoginTTL  = 5 * time.Minute
	consoleMaxLogins = 1024
)

type consoleUserKey struct{}

// consoleUser is the authenticated user of a console request (the admin under trust).
func consoleUser(ctx context.Context) auth.UserDef {
	if u, ok := ctx.Value(consoleUserKey{}).(auth.UserDef); ok {
		return u
	}
	return auth.UserDef{Name: auth.AdminUser, Role: auth.RoleAdmin}
}

func (a *consoleAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var u auth.UserDef
	switch a.method {
	case auth.SCRAM:
		name, password, ok := r.BasicAuth()
		if !ok {
			a.challenge(w, "the console needs a user and password (the same as psql's)")
			return
		}
		if u, ok = a.check(name, password); !ok {
			a.challenge(w, "wrong user or password")
			return
		}
	default:
		if !listen.IsLoopback(r.RemoteAddr) { // a host:port, as a listen address is
			apiError(w, http.StatusForbidden, pgwire.CodeInvalidAuthorization,
				"the server runs with trust authentication, which serves loopback clients only: start it with --auth scram-sha-256 to use the console from "+r.RemoteAddr)
			return
		}
		u = auth.UserDef{Name: auth.AdminUser, Role: auth.RoleAdmin}
	}
	a.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), consoleUserKey{}, u)))
}

func (a *consoleAuth) challenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="rsql", charset="UTF-8"`)
	apiError(w, http.StatusUnauthorized, pgwire.CodeInvalidPassword, msg)
}

// check verifies a password against the user's SCRAM secret: the stored key derived from
// the password with the secret's salt and iterations must equal the stored one.
func (a *consoleAuth) check(name, password string) (auth.UserDef, bool) {
	u, found := auth.UserDef{}, false
	if a.users != nil {
		u, found = a.users.User(name)
	}
	key := sha256.Sum256([]byte(name + "\x00" + password + "\x00" + u.Secret))
	now := time.Now()
	a.mu.Lock()
	if l, ok := a.logins[key]; ok && now.Before(l.expires) {
		a.mu.Unlock()
		return l.user, true
	}
	a.mu.Unlock()
	// Checked even for a user that is not found, so the answer's time does not tell.
	if ok := auth.CheckPassword(u.Secret, password); !ok || !found {
		return u, false
	}
	a.mu.Lock()
	if a.logins == nil || len(a.logins) >= consoleMaxLogins {
		a.logins = map[[sha256.Size]byte]consoleLogin{}
	}
	a.logins[key] = consoleLogin{user: u, expires: now.Add(consoleLoginTTL)}
	a.mu.Unlock()
	return u, true
}
