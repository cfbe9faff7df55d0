// Package auth is how rsql's front ends check who a client is: users and roles as the
// catalog stores them (UserDef, Role), the authentication methods (trust, SCRAM-SHA-256),
// and SCRAM-SHA-256 itself (scram.go: secrets in PostgreSQL's text form, the server side
// of an exchange, and a password check against a secret for HTTP Basic), and how logs
// show a statement without its passwords (redact.go).
//
// Contract: the catalog keeps only a user's secret, never the password. An exchange or a
// password check for an unknown user, or one without a password, does the same work as a
// real one and fails, so neither tells which users exist.
//
// Imports: the standard library and golang.org/x/text only. It never imports the engine
// (package server) or the front ends; they import it.
package auth
