package sql

import "testing"

const benchQuery = `SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) WHERE amount > 10 AND user_id LIKE 'u%'
GROUP BY user_id, window_start, window_end`

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchQuery); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAndBind(b *testing.B) {
	cat := newTestCatalog()
	b.ReportAllocs()
	for b.Loop() {
		sts, err := Parse(benchQuery)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Bind(sts[0].(*Select), cat); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEval(b *testing.B, expr string) {
	sts, err := Parse("SELECT " + expr + " FROM orders")
	if err != nil {
		b.Fatal(err)
	}
	q, err := Bind(sts[0].(*Select), newTestCatalog())
	if err != nil {
		b.Fatal(err)
	}
	f := MustCompile(q.Select[0])
	row := evalRow
	b.ReportAllocs()
	for b.Loop() {
		f(row)
	}
}

func BenchmarkEvalFilter(b *testing.B) { benchEval(b, "amount > 10 AND user_id = 'u7'") }
func BenchmarkEvalArith(b *testing.B)  { benchEval(b, "qty * 2 + order_id - 1") }
func BenchmarkEvalDecimal(b *testing.B) {
	benchEval(b, "price * 2 + 1.5")
}
func BenchmarkEvalLike(b *testing.B) { benchEval(b, "user_id LIKE '%7%x%'") }
func BenchmarkEvalCase(b *testing.B) {
	benchEval(b, "CASE WHEN amount > 100 THEN 'big' WHEN amount > 10 THEN 'mid' ELSE 'small' END")
}
func BenchmarkEvalJSON(b *testing.B)    { benchEval(b, "payload->>'$.a.b[1]'") }
func BenchmarkEvalExtract(b *testing.B) { benchEval(b, "EXTRACT(HOUR FROM ts)") }

// Arithmetic per type, for docs/benchmarks.md's events per CPU-second of NUMERIC beside
// BIGINT and DOUBLE: the same shape, x * 3 + x - 1.
func BenchmarkArithBigInt(b *testing.B) { benchEval(b, "order_id * 3 + order_id - 1") }
func BenchmarkArithDouble(b *testing.B) { benchEval(b, "amount * 3 + amount - 1") }
func BenchmarkArithNumeric(b *testing.B) {
	benchEval(b, "price * 3 + price - 1")
}

// NUMERIC beyond 64 bits (the apd path).
func BenchmarkArithNumericBig(b *testing.B) {
	benchEval(b, "(price + 123456789012345678901234567890) * 3 + price - 1")
}
func BenchmarkArithNumericDivide(b *testing.B) { benchEval(b, "price / 7") }
func BenchmarkEvalCaseOfOneOperand(b *testing.B) {
	benchEval(b, "CASE WHEN LOWER(user_id) = 'apple' THEN '0' WHEN LOWER(user_id) = 'google' THEN '1' WHEN LOWER(user_id) = 'facebook' THEN '2' WHEN LOWER(user_id) = 'baidu' THEN '3' ELSE user_id END")
}
