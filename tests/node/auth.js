// node-postgres against an rsql server that checks passwords (SCRAM-SHA-256), over TLS or
// not: connects as USER with PASSWORD and runs one query. Prints "ok <n>" or
// "error <SQLSTATE> <message>"; tests/security_test.go compares it.
// Usage: node auth.js HOST PORT USER PASSWORD [require|verify-full CA_FILE]
const fs = require('fs');
const { Client } = require('pg');

async function main() {
  const [host, port, user, password, ssl, ca] = process.argv.slice(2);
  const config = { host, port: Number(port), user, password, database: 'rsql' };
  if (ssl === 'require') {
    config.ssl = { rejectUnauthorized: false };
  } else if (ssl === 'verify-full') {
    config.ssl = { ca: fs.readFileSync(ca, 'utf8'), rejectUnauthorized: true, servername: host };
  }
  const client = new Client(config);
  try {
    await client.connect();
    const res = await client.query('SELECT 20 + 22 AS n');
    console.log(`ok ${res.rows[0].n} ${client.connection.stream.encrypted === true}`);
    await client.end();
  } catch (e) {
    console.log(`error ${e.code} ${e.message}`);
  }
}

main();
