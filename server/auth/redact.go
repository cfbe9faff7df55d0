package auth

import (
	"fmt"
	"regexp"
	"strings"
)

// userStatement matches the statements whose string literals are passwords.
var userStatement = regexp.MustCompile(`(?i)\b(create|alter)\s+(user|role)\b`)

// MaxLoggedStatement is how much of a statement text a log line shows.
const MaxLoggedStatement = 1000

// LogStatement is a statement text as logs show it: at most MaxLoggedStatement bytes, with
// every string literal of a text holding CREATE USER or ALTER USER (its passwords) shown
// as '***'.
func LogStatement(text string) string {
	if userStatement.MatchString(text) {
		var b strings.Builder
		for i := 0; i < len(text); i++ {
			if text[i] != '\'' {
				b.WriteByte(text[i])
				continue
			}
			j := i + 1
			for j < len(text) {
				if text[j] == '\'' {
					if j+1 < len(text) && text[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.WriteString("'***'")
			i = j
		}
		text = b.String()
	}
	text = redactConnPasswords(text)
	if len(text) > MaxLoggedStatement {
		return text[:MaxLoggedStatement] + fmt.Sprintf("... (%d bytes)", len(text))
	}
	return text
}

// Passwords of connection strings (a lookup table's url): postgres://user:password@host and
// password=... pairs.
var (
	urlPassword = regexp.MustCompile(`(://[^:/@\s']*:)[^/\s']*@`)
	kvPassword  = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)[^\s']+`)
)

// redactConnPasswords shows the passwords of the connection strings in a statement text as
// ***, for logs.
func redactConnPasswords(text string) string {
	text = urlPassword.ReplaceAllString(text, "${1}***@")
	return kvPassword.ReplaceAllString(text, "${1}***")
}
