// Package durabletest is a durable.StateFS for tests that fails on demand: the real file
// system with the nth operation of one kind, on a file whose name contains a given string,
// made to fail (in the style of pebble's errorfs). It imports nothing of rsql but durable.
package durabletest
