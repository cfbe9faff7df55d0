// Package listen is what every rsql listener (Postgres wire, the bundled broker's name
// server and broker, HTTP) shares about accepting connections: an accept error that is
// temporary (file descriptors or buffers running out, a connection aborted before it was
// accepted) is retried after a pause that grows from 5 ms to 1 s, as net/http does, and
// logged; any other error stops the listener, and the listener's owner reports it (rsql's
// /healthz fails while a listener has stopped). docs/security.md ("Listeners") states it
// for users.
package listen
