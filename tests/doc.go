// Package tests holds rsql's end-to-end tests: they build the real rsql binary, start it (and
// real peers: PostgreSQL, the official RocketMQ Go client) on free loopback ports, drive it as
// a user would, and stop every process by its PID when the test ends.
package tests
