package auth

import (
	"crypto/subtle"
	"strings"
)

// Method is how a front end (the Postgres wire, the web console) authenticates a client.
type Method string

const (
	// Trust takes every client for the user it names, without a password, and only
	// from loopback addresses: a client from any other address is refused (28000).
	Trust Method = "trust"
	// SCRAM checks the password with SCRAM-SHA-256 (PostgreSQL's default method):
	// wrong password or unknown user, 28P01.
	SCRAM Method = "scram-sha-256"
)

// Role is what a user may do (docs/security.md, "Users and roles").
type Role string

const (
	// RoleAdmin may do everything: DDL, INSERT, job control, users.
	RoleAdmin Role = "admin"
	// RoleReadOnly may read: SELECT (pull and push queries), SHOW, DESCRIBE, EXPLAIN, SET,
	// the transaction statements, and ALTER USER of its own password.
	RoleReadOnly Role = "read_only"
)

// UserDef is a user as the catalog stores it: the SCRAM-SHA-256 secret (scram.go), never the
// password. Secret is "" for a user created without a password, who cannot log in where
// passwords are checked.
type UserDef struct {
	Name   string `json:"name"`
	Role   Role   `json:"role"`
	Secret string `json:"secret,omitempty"`
}

// AdminUser is the name of the first admin, created when the server starts with password
// authentication and no admin exists (docs/security.md).
const AdminUser = "rsql"

// UserStore is where authentication finds users (the engine's catalog).
type UserStore interface {
	User(name string) (UserDef, bool)
}

// Mechanism is the SASL mechanism offered: SCRAM-SHA-256 (channel binding, -PLUS, is not).
const Mechanism = scramMechanism

var (
	// ErrMalformed is a malformed SCRAM message: the exchange ends with 08P01.
	ErrMalformed = errSCRAM
	// ErrWrongProof is a proof that does not match: the password is wrong (or the user
	// does not exist).
	ErrWrongProof = errSCRAMProof
)

// NewSecret derives a SCRAM-SHA-256 secret, in PostgreSQL's text form, from password
// with a fresh random salt.
func NewSecret(password string) (string, error) { return newSCRAMSecret(password) }

// CheckSecret reports why text is not a SCRAM-SHA-256 secret in PostgreSQL's text form.
func CheckSecret(text string) error {
	_, err := parseSCRAMSecret(text)
	return err
}

// IsSecretText reports whether text claims to be a secret (starts with the mechanism and
// '$'), as psql's \password sends one.
func IsSecretText(text string) bool {
	return strings.HasPrefix(text, scramMechanism+"$")
}

// RandomPassword is a password for a generated admin: 18 random bytes, base64url.
func RandomPassword() (string, error) { return randomPassword() }

// CheckPassword verifies password against a user's secret text: the stored key derived
// from the password with the secret's salt and iterations must equal the stored one. An
// unusable secret ("" or malformed) costs the same work as a real check, so the time of
// the answer does not tell whether the user exists.
func CheckPassword(secret, password string) bool {
	s, err := parseSCRAMSecret(secret)
	if err != nil {
		deriveSCRAMSecret(password, make([]byte, scramSaltLen), scramIterations)
		return false
	}
	got, err := deriveSCRAMSecret(password, s.salt, s.iterations)
	return err == nil && subtle.ConstantTimeCompare(got.storedKey, s.storedKey) == 1
}

// Exchange is the server side of one SCRAM-SHA-256 exchange. An exchange for a user
// that does not exist, or has no password, runs with a made-up secret and fails at the
// proof, as PostgreSQL does, so the exchange does not tell which users exist.
type Exchange struct{ s *scramServer }

// NewExchange prepares an exchange for the user with the given secret text ("" for an
// unknown user or one without a password; mockKey then derives a stable made-up salt
// from the user name).
func NewExchange(secret, user string, mockKey []byte) *Exchange {
	return &Exchange{newSCRAMServer(secret, user, mockKey)}
}

// First takes the client-first-message and returns the server-first-message.
func (e *Exchange) First(msg []byte) ([]byte, error) { return e.s.first(msg) }

// Final takes the client-final-message and returns the server-final-message when the
// proof is right; ErrWrongProof when it is not, ErrMalformed when the message is
// malformed.
func (e *Exchange) Final(msg []byte) ([]byte, error) { return e.s.final(msg) }

// RoleText names a role in a permission error: "read-only", "without a role", or the role.
func RoleText(r Role) string {
	switch r {
	case RoleReadOnly:
		return "read-only"
	case "":
		return "without a role"
	}
	return string(r)
}
