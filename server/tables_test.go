package server

import "testing"

// DROP names what it drops: a table is dropped with DROP TABLE, not DROP STREAM or VIEW.
func TestDropTable(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec(`CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (topic = 'users')`)
	te.mustExec(`CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (topic = 'orders')`)
	te.wantCode(`DROP STREAM users`, "42809", `"users" is not a stream (use DROP TABLE)`)
	te.wantCode(`DROP VIEW users`, "42809", `"users" is not a view (use DROP TABLE)`)
	te.wantCode(`DROP TABLE orders`, "42809", `"orders" is not a table (use DROP STREAM)`)
	res, _ := te.mustExec(`DROP TABLE users`)
	if res[0].Tag != "DROP TABLE" {
		t.Fatalf("tag %q", res[0].Tag)
	}
	te.wantCode(`DROP TABLE users`, "42P01", "does not exist")
	te.mustExec(`DROP TABLE IF EXISTS users`)
}
