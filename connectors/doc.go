// Package connectors holds rsql's sources and sinks (file, broker topics, print) and record
// formats (JSON lines, CSV).
//
// Contract: a Source is a set of splits, each read in offset order by a SplitReader; a Sink
// takes raw messages and makes them durable at Flush. Formats turn message bodies into typed
// rows of a schema and back; a body that does not fit the schema is an error that names the
// field, never a panic. Connectors know nothing about operators or plans.
package connectors
