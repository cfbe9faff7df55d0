// Package console is rsql's web console: a JSON API under /api/v1/ (docs/operations.md,
// "Web console") and the pages that use it (index.html, console.js, console.css, embedded
// in the binary). The pages are plain JavaScript, CSS and SVG written for rsql: no
// third-party code, nothing fetched from elsewhere.
//
// It never imports package server: it reaches the engine through Engine (engine.go), which
// server implements with an adapter (consoleEngine): the catalog's jobs (with the state
// SHOW JOBS shows) and streams, the runs of jobs in this process, the cluster's members
// running a job, job control, statements run in a pgwire.Session, and the users.
//
// Contract:
//   - GET requests change nothing. POST requests (SQL, job actions) are refused with 403
//     when the browser says they come from a page of another origin (Origin header), so a
//     web page elsewhere cannot drive a local rsql; POST /api/v1/sql takes a JSON body and
//     runs its statements through the engine like any statement.
//   - Errors are JSON {"error": {"code": SQLSTATE when the engine gave one, "message"}}
//     with a 4xx/5xx status.
//   - Every request answers to the wire's authentication (auth.go, docs/security.md, "The
//     web console"): loopback clients only under trust, as the admin; HTTP Basic against
//     the users' SCRAM secrets under scram-sha-256, with the user's role.
//   - Job history (charts) is sampled every consoleSampleEvery by one goroutine started
//     with the console and kept for consoleWindow per job (history.go); Close stops it.
package console
