// node-postgres against an rsql server: connect, a statement, a query with parameters, an
// error with its SQLSTATE, columns read by their PostgreSQL names. Prints one line per check; tests/clients_test.go compares them.
// Usage: node client.js HOST PORT
const { Client } = require('pg');

async function main() {
  const [host, port] = process.argv.slice(2);
  const client = new Client({ host, port: Number(port), user: 'rsql', database: 'rsql' });
  await client.connect();
  console.log('connected');

  await client.query("CREATE STREAM node_orders (id BIGINT, item VARCHAR, price DOUBLE, ts TIMESTAMP) WITH (queues = 1)");
  const ins = await client.query('INSERT INTO node_orders VALUES ($1, $2, $3, $4)', [7, 'tea', 2.5, '2026-11-30T05:00:00Z']);
  console.log('inserted ' + ins.rowCount);
  await client.query("INSERT INTO node_orders VALUES (8, 'cake', 4.25, '2026-11-30T05:00:01Z')");

  await client.query("SET offset_reset = 'earliest'");
  const res = await client.query('SELECT id, item, price * 2 AS total, ts FROM node_orders WHERE id = $1 LIMIT 1', [8]);
  const r = res.rows[0];
  console.log(`row ${typeof r.id} ${r.id} ${r.item} ${typeof r.total} ${r.total} ${r.ts instanceof Date} ${r.ts.toISOString()}`);

  // Transactions: BEGIN and COMMIT succeed with a notice; the insert takes effect at once.
  const notices = [];
  client.on('notice', (n) => notices.push(n.message));
  await client.query('BEGIN');
  await client.query("INSERT INTO node_orders VALUES (9, 'pie', 1.5, '2026-11-30T05:00:02Z')");
  await client.query('COMMIT');
  console.log(`transaction ${notices.length} ${notices.every((m) => m.includes('no transactions'))}`);

  try {
    await client.query('SELECT nope FROM node_orders');
    console.log('error missing');
  } catch (e) {
    console.log(`error ${e.code} ${e.message}`);
  }
  const again = await client.query('SELECT item FROM node_orders WHERE id = $1 LIMIT 1', [7]);
  console.log('after error ' + again.rows[0].item);

  // Columns read by name, named as PostgreSQL names them; keywords as column names.
  await client.query('CREATE STREAM node_keys (key VARCHAR, rank INT, rows INT) WITH (queues = 1)');
  await client.query("INSERT INTO node_keys VALUES ('k', 3, 4)");
  const named = await client.query('SELECT key, rows, rank + rows, upper(key), CAST(1 AS BIGINT) FROM node_keys LIMIT 1');
  const n = named.rows[0];
  console.log(`names ${named.fields.map((f) => f.name).join(',')} ${n.key} ${n.rows} ${n['?column?']} ${n.upper}`);
  await client.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
