package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"slices"
	"strings"
)

// The extFields RocketMQ's ACL adds to a signed request (docs/security.md, "Broker access
// control").
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
)

// Credentials are an account of a broker's ACL: requests signed with them carry AccessKey,
// Signature and, when set, SecurityToken. The zero value signs nothing.
type Credentials struct {
	AccessKey     string
	SecretKey     string
	SecurityToken string
}

// IsZero reports whether c lacks a key, i.e. requests go unsigned.
func (c Credentials) IsZero() bool { return c.AccessKey == "" || c.SecretKey == "" }

// String never shows the secret key (credentials end up in %v of configuration structs).
func (c Credentials) String() string {
	if c.IsZero() {
		return "no credentials"
	}
	return "access key " + c.AccessKey
}

// GoString keeps the secret out of %#v too.
func (c Credentials) GoString() string { return "remoting.Credentials{" + c.String() + "}" }

// Sign adds c's AccessKey (and SecurityToken) to cmd's extFields and signs it as
// RocketMQ's Java client does: Signature is the base64 HMAC-SHA1, keyed with the secret key,
// of AppendContent over every extField but Signature, followed by the body. It does nothing
// when c IsZero. Sign cmd after its last extField is set.
func (c Credentials) Sign(cmd *Command) {
	if c.IsZero() {
		return
	}
	if cmd.ExtFields == nil {
		cmd.ExtFields = map[string]string{}
	}
	cmd.ExtFields[ExtAccessKey] = c.AccessKey
	if c.SecurityToken != "" {
		cmd.ExtFields[ExtSecurityToken] = c.SecurityToken
	}
	delete(cmd.ExtFields, ExtSignature)
	mac := hmac.New(sha1.New, []byte(c.SecretKey))
	mac.Write(AppendContent(nil, cmd.ExtFields, nil))
	mac.Write(cmd.Body)
	cmd.ExtFields[ExtSignature] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// AppendContent appends the signed content of a request's extFields to dst: their values
// (not their names), in the byte order of their names, leaving out Signature and any name
// skip reports. The body, signed after it, is not included.
func AppendContent(dst []byte, ext map[string]string, skip func(name string) bool) []byte {
	var arr [32][2]string
	kvs := arr[:0]
	for k, v := range ext {
		if k == ExtSignature || skip != nil && skip(k) {
			continue
		}
		kvs = append(kvs, [2]string{k, v})
	}
	slices.SortFunc(kvs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	for _, kv := range kvs {
		dst = append(dst, kv[1]...)
	}
	return dst
}
