// Package pgtest starts a private PostgreSQL server for rsql's tests: its own data
// directory, a free loopback port, trust authentication, fsync off, run as the postgres
// system user when the tests run as root (the server refuses root). Stop ends it by its PID
// and removes its files; StopServer and StartServer stop and start the server alone, on the
// same data and port (a database restart as clients see it).
// It is test support only; no production package imports it.
package pgtest
