package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// The exchange of RFC 7677, section 3 (user "user", password "pencil"): the server's
// final message is the RFC's, and any other proof is refused.
func TestSCRAMRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sec, err := deriveSCRAMSecret("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parseSCRAMSecret(sec.String())
	if err != nil || parsed.String() != sec.String() {
		t.Fatalf("secret %s does not read back: %v", sec, err)
	}
	const (
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	exchange := func() *scramServer {
		ex := &scramServer{secret: parsed}
		first, err := ex.first([]byte(clientFirst))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(first), "r=rOprNGfwEbeRWgbNEkqO") || !strings.HasSuffix(string(first), ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") {
			t.Fatalf("server-first-message %q", first)
		}
		// The RFC's server nonce instead of our random one.
		ex.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		ex.serverFirst = serverFirst
		return ex
	}
	got, err := exchange().final([]byte(clientFinal))
	if err != nil || string(got) != serverFinal {
		t.Fatalf("server-final-message %q, %v; want %q", got, err, serverFinal)
	}
	bad := strings.Replace(clientFinal, "p=dHzb", "p=dHzc", 1)
	if _, err := exchange().final([]byte(bad)); !errors.Is(err, errSCRAMProof) {
		t.Fatalf("a wrong proof: %v, want errSCRAMProof", err)
	}
	// A mock exchange (unknown user) refuses the right proof too.
	mock := exchange()
	mock.mock = true
	if _, err := mock.final([]byte(clientFinal)); !errors.Is(err, errSCRAMProof) {
		t.Fatalf("mock exchange: %v", err)
	}
}

// Malformed messages are refused with errSCRAM, never a panic or a pass.
func TestSCRAMMalformed(t *testing.T) {
	for _, first := range []string{"", "n", "n,", "x,,n=u,r=abc", "p=tls-server-end-point,,n=u,r=abc", "n,a=admin,n=u,r=abc",
		"n,,m=ext,n=u,r=abc", "n,,r=abc", "n,,n=u", "n,,n=u,r=", "n,,n=u,r=a,b"} {
		ex := &scramServer{secret: scramSecret{iterations: 1, salt: []byte{1}}}
		if _, err := ex.first([]byte(first)); !errors.Is(err, errSCRAM) {
			if first == "n,,n=u,r=a,b" && err == nil {
				continue // "b" is an extension attribute, which RFC 5802 allows
			}
			t.Errorf("client-first %q: %v, want errSCRAM", first, err)
		}
	}
	ex := newSCRAMServer("", "nobody", []byte("k"))
	if _, err := ex.first([]byte("y,,n=,r=abc")); err != nil {
		t.Fatal(err)
	}
	for _, final := range []string{"", "c=biws", "c=biws,r=abc,p=", "c=eSws,r=wrong,p=AAAA", "c=biws," + "r=" + ex.nonce + ",p=AAAA",
		"r=" + ex.nonce + ",c=eSws,p=AAAA"} {
		if _, err := ex.final([]byte(final)); !errors.Is(err, errSCRAM) {
			t.Errorf("client-final %q: %v, want errSCRAM", final, err)
		}
	}
	for _, s := range []string{"", "SCRAM-SHA-256$", "SCRAM-SHA-256$4096:c2FsdA==$a:b", "SCRAM-SHA-256$0:c2FsdA==$" + strings.Repeat("A", 44) + ":" + strings.Repeat("A", 44),
		"md5abc", "SCRAM-SHA-256$x:c2FsdA==$a:b"} {
		if _, err := parseSCRAMSecret(s); err == nil {
			t.Errorf("secret %q read without error", s)
		}
	}
}

// FuzzSCRAM feeds the server side of an exchange any client messages, and the secret reader
// any text: errors, never panics; a proof is never accepted for a made-up secret.
func FuzzSCRAM(f *testing.F) {
	f.Add("n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=")
	f.Add("y,,n=,r=x", "c=eSws,r=x,p=", "")
	f.Add("p=x,,n=a,r=b", "", "SCRAM-SHA-256$1:$:")
	f.Fuzz(func(t *testing.T, first, final, secret string) {
		parseSCRAMSecret(secret)
		ex := newSCRAMServer(secret, "u", []byte("key"))
		if _, err := ex.first([]byte(first)); err != nil {
			return
		}
		if _, err := ex.final([]byte(final)); err == nil && ex.mock {
			t.Fatalf("a made-up secret accepted a proof: %q %q", first, final)
		}
	})
}
