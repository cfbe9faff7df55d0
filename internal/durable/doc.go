// Package durable replaces files so that a crash — of the process or of the machine — leaves
// either the old content or the new, never a mix and never nothing: WriteFile writes a
// temporary file next to the target, fsyncs it, renames it over the target and fsyncs the
// directory, so the rename itself is on disk when WriteFile returns. A caller that drops
// something the file supersedes (a journal the new snapshot covers) does so only after
// WriteFile returned nil.
//
// The file system is a seam (FS; StateFS adds reading a file and making a directory) so that
// callers' tests can fail any step of it; OS is the real one. The package imports nothing of rsql.
package durable
