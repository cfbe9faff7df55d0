package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/text/secure/precis"
)

// SCRAM-SHA-256 (RFC 5802 with RFC 7677's hash), the server side, as PostgreSQL runs it
// over the wire (AuthenticationSASL, SASLInitialResponse, AuthenticationSASLContinue,
// SASLResponse, AuthenticationSASLFinal). The catalog keeps for each user only the secret
// PostgreSQL keeps: SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, base64. The
// password never reaches the server during authentication, and checking a proof costs two
// HMACs and a hash, so failed attempts are cheap for the server (the client pays the
// iterations). Channel binding (SCRAM-SHA-256-PLUS) is not offered.

const (
	scramMechanism  = "SCRAM-SHA-256"
	scramIterations = 4096 // PostgreSQL's default scram_iterations
	scramSaltLen    = 16
	scramNonceLen   = 18 // random bytes of the server's part of the nonce
)

// errSCRAM is a malformed SCRAM message: the exchange ends with 08P01.
var errSCRAM = errors.New("malformed SCRAM message")

// scramSecret is what the server stores to check a SCRAM-SHA-256 proof.
type scramSecret struct {
	iterations           int
	salt                 []byte
	storedKey, serverKey []byte
}

// String is the secret in PostgreSQL's text form.
func (s scramSecret) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", scramMechanism, s.iterations, b64(s.salt), b64(s.storedKey), b64(s.serverKey))
}

// parseSCRAMSecret reads a secret in PostgreSQL's text form.
func parseSCRAMSecret(text string) (scramSecret, error) {
	var s scramSecret
	rest, ok := strings.CutPrefix(text, scramMechanism+"$")
	if !ok {
		return s, fmt.Errorf("not a %s secret", scramMechanism)
	}
	iterSalt, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return s, errors.New("missing '$' before the keys")
	}
	iter, salt, ok := strings.Cut(iterSalt, ":")
	if !ok {
		return s, errors.New("missing ':' between iterations and salt")
	}
	n, err := strconv.Atoi(iter)
	if err != nil || n < 1 || n > 1<<24 {
		return s, fmt.Errorf("iterations %q: want a whole number from 1 to %d", iter, 1<<24)
	}
	s.iterations = n
	stored, server, ok := strings.Cut(keys, ":")
	if !ok {
		return s, errors.New("missing ':' between the stored and the server key")
	}
	if s.salt, err = base64.StdEncoding.DecodeString(salt); err != nil || len(s.salt) == 0 {
		return s, errors.New("the salt is not base64")
	}
	if s.storedKey, err = base64.StdEncoding.DecodeString(stored); err != nil || len(s.storedKey) != sha256.Size {
		return s, errors.New("the stored key is not 32 bytes of base64")
	}
	if s.serverKey, err = base64.StdEncoding.DecodeString(server); err != nil || len(s.serverKey) != sha256.Size {
		return s, errors.New("the server key is not 32 bytes of base64")
	}
	return s, nil
}

// newSCRAMSecret derives a secret from password with a fresh random salt.
func newSCRAMSecret(password string) (string, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	s, err := deriveSCRAMSecret(password, salt, scramIterations)
	if err != nil {
		return "", err
	}
	return s.String(), nil
}

func deriveSCRAMSecret(password string, salt []byte, iterations int) (scramSecret, error) {
	salted, err := pbkdf2.Key(sha256.New, normalizePassword(password), salt, iterations, sha256.Size)
	if err != nil {
		return scramSecret{}, err
	}
	clientKey := hmacSHA256(salted, []byte("Client Key"))
	stored := sha256.Sum256(clientKey)
	return scramSecret{iterations: iterations, salt: salt, storedKey: stored[:], serverKey: hmacSHA256(salted, []byte("Server Key"))}, nil
}

// normalizePassword is SASLprep as clients apply it before hashing: ASCII passwords are
// used as they are (as PostgreSQL does); others are normalized with PRECIS OpaqueString,
// SASLprep's successor, which pgx uses too, falling back to the raw text when that fails.
func normalizePassword(p string) string {
	ascii := true
	for i := 0; i < len(p); i++ {
		if p[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return p
	}
	if n, err := precis.OpaqueString.String(p); err == nil {
		return n
	}
	return p
}

func hmacSHA256(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

// randomPassword is a password for a generated admin: 18 random bytes, base64url.
func randomPassword() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// scramServer is the server side of one SCRAM-SHA-256 exchange. An exchange for a user
// that does not exist, or has no password, runs with a made-up secret (mock) and fails at
// the proof, as PostgreSQL does, so the exchange does not tell which users exist.
type scramServer struct {
	secret scramSecret
	mock   bool

	gs2Header       string // the client-first-message's GS2 header, which c= must repeat
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
}

// newSCRAMServer prepares an exchange for the user with the given secret text (""
// for an unknown user or one without a password; mockKey then derives a stable made-up
// salt from the user name).
func newSCRAMServer(secret, user string, mockKey []byte) *scramServer {
	s := &scramServer{}
	if secret != "" {
		if sec, err := parseSCRAMSecret(secret); err == nil {
			s.secret = sec
			return s
		}
	}
	s.mock = true
	s.secret = scramSecret{iterations: scramIterations, salt: hmacSHA256(mockKey, []byte(user))[:scramSaltLen]}
	return s
}

// first takes the client-first-message and returns the server-first-message.
func (s *scramServer) first(msg []byte) ([]byte, error) {
	text := string(msg)
	// gs2-header: gs2-cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(text, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no GS2 header", errSCRAM)
	}
	switch {
	case flag == "n", flag == "y":
		// n: the client does not do channel binding; y: it would, but thinks the server
		// does not (right: no -PLUS mechanism is offered).
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: channel binding was requested but SCRAM-SHA-256-PLUS is not offered", errSCRAM)
	default:
		return nil, fmt.Errorf("%w: unknown channel-binding flag %q", errSCRAM, flag)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: the GS2 header does not end", errSCRAM)
	}
	if authzid != "" {
		return nil, fmt.Errorf("%w: an authorization identity is not supported", errSCRAM)
	}
	s.gs2Header = flag + ",,"
	s.clientFirstBare = bare
	var clientNonce string
	for i, attr := range strings.Split(bare, ",") {
		switch {
		case i == 0 && strings.HasPrefix(attr, "m="):
			return nil, fmt.Errorf("%w: mandatory extensions are not supported", errSCRAM)
		case i == 0 && strings.HasPrefix(attr, "n="):
			// The user name; PostgreSQL takes the startup message's instead.
		case i == 0:
			return nil, fmt.Errorf("%w: the message does not start with n=", errSCRAM)
		case i == 1 && strings.HasPrefix(attr, "r="):
			clientNonce = attr[2:]
		case i == 1:
			return nil, fmt.Errorf("%w: no client nonce", errSCRAM)
		}
	}
	if clientNonce == "" || !printableNonce(clientNonce) {
		return nil, fmt.Errorf("%w: the client nonce is empty or not printable", errSCRAM)
	}
	sn := make([]byte, scramNonceLen)
	if _, err := rand.Read(sn); err != nil {
		return nil, err
	}
	s.nonce = clientNonce + base64.RawStdEncoding.EncodeToString(sn)
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.secret.salt), s.secret.iterations)
	return []byte(s.serverFirst), nil
}

// printableNonce: RFC 5802's printable, ASCII 0x21-0x7E except ','.
func printableNonce(n string) bool {
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// errSCRAMProof is a proof that does not match: the password is wrong (or the user does
// not exist).
var errSCRAMProof = errors.New("wrong SCRAM proof")

// final takes the client-final-message and returns the server-final-message when the
// proof is right; errSCRAMProof when it is not, errSCRAM when the message is malformed.
func (s *scramServer) final(msg []byte) ([]byte, error) {
	text := string(msg)
	i := strings.LastIndex(text, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: no proof", errSCRAM)
	}
	withoutProof, proofText := text[:i], text[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: the final message does not start with c= and r=", errSCRAM)
	}
	cbind, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cbind) != s.gs2Header {
		return nil, fmt.Errorf("%w: the channel-binding data does not repeat the GS2 header", errSCRAM)
	}
	if attrs[1][2:] != s.nonce {
		return nil, fmt.Errorf("%w: the nonce does not match", errSCRAM)
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != sha256.Size {
		return nil, fmt.Errorf("%w: the proof is not 32 bytes of base64", errSCRAM)
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	if s.mock {
		return nil, errSCRAMProof
	}
	clientKey := hmacSHA256(s.secret.storedKey, authMessage)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], s.secret.storedKey) != 1 {
		return nil, errSCRAMProof
	}
	var out bytes.Buffer
	out.WriteString("v=")
	out.WriteString(base64.StdEncoding.EncodeToString(hmacSHA256(s.secret.serverKey, authMessage)))
	return out.Bytes(), nil
}
