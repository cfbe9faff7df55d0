package server

import (
	"strings"
	"testing"
)

// Passwords become secrets; a SCRAM secret given as the password is kept as it is (what
// psql's \password sends), and a malformed one is refused.
func TestSecretOf(t *testing.T) {
	s1, err := secretOf("pencil")
	if err != nil || !strings.HasPrefix(s1, "SCRAM-SHA-256$4096:") {
		t.Fatalf("secretOf(pencil) = %q, %v", s1, err)
	}
	s2, _ := secretOf("pencil")
	if s1 == s2 {
		t.Fatal("two secrets of one password share a salt")
	}
	if kept, err := secretOf(s1); err != nil || kept != s1 {
		t.Fatalf("a SCRAM secret as password: %q, %v", kept, err)
	}
	if _, err := secretOf("SCRAM-SHA-256$nope"); err == nil {
		t.Fatal("a malformed secret accepted")
	}
	if _, err := secretOf(""); err == nil {
		t.Fatal("an empty password accepted")
	}
}

func TestLogStatementRedactsPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"CREATE USER a WITH PASSWORD 'se''cret' ADMIN":   "CREATE USER a WITH PASSWORD '***' ADMIN",
		"alter   role b password 'x'; SELECT 'visible?'": "alter   role b password '***'; SELECT '***'",
		"SELECT 'kept' FROM s":                           "SELECT 'kept' FROM s",
	} {
		if got := logStatement(in); got != want {
			t.Errorf("logStatement(%q) = %q, want %q", in, got, want)
		}
	}
	long := logStatement(strings.Repeat("x", 5000))
	if len(long) > maxLoggedStatement+40 || !strings.HasSuffix(long, "(5000 bytes)") {
		t.Errorf("a long statement logs as %d bytes: ...%q", len(long), long[len(long)-20:])
	}
}
