package pgwire

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPGDataRow measures encoding one row of every type into a DataRow.
func BenchmarkPGDataRow(b *testing.B) {
	for _, format := range []int16{formatText, formatBinary} {
		name := map[int16]string{formatText: "text", formatBinary: "binary"}[format]
		b.Run(name, func(b *testing.B) {
			formats := make([]int16, len(pgTypedCols))
			for i := range formats {
				formats[i] = format
			}
			var buf []byte
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var err error
				buf, err = appendDataRow(buf[:0], pgTypedRows[0], pgTypedCols, formats)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkPGSelectRows measures rows per second from the Executor to a pgx client over
// loopback ("select many" returns 1000 BIGINT rows).
func BenchmarkPGSelectRows(b *testing.B) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		b.Run(mode.String(), func(b *testing.B) {
			srv := NewServer(pgDescribingExec{&pgTestExec{}}, Config{})
			ln := listenLoopback(b)
			go srv.Serve(ln)
			defer srv.Close()
			conn := pgConnect(b, ln.Addr().String(), mode)
			ctx := context.Background()
			b.ResetTimer()
			rows := 0
			for i := 0; i < b.N; i++ {
				r, err := conn.Query(ctx, "select many")
				if err != nil {
					b.Fatal(err)
				}
				for r.Next() {
					var v int64
					r.Scan(&v)
					rows++
				}
				if r.Err() != nil {
					b.Fatal(r.Err())
				}
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
