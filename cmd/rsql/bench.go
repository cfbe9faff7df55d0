package main

// BenchCmd groups the benchmarks.
type BenchCmd struct {
	Broker BenchBrokerCmd `cmd:"" help:"Produce and consume throughput and latency of the bundled broker."`
}
