package main

// BenchCmd groups the benchmarks.
type BenchCmd struct {
	Broker   BenchBrokerCmd   `cmd:"" help:"Produce and consume throughput and latency of the bundled broker."`
	Pipeline BenchPipelineCmd `cmd:"" help:"End-to-end job throughput (topic -> tumbling COUNT/SUM -> topic), checkpoint cost and recovery time."`
	Nexmark  BenchNexmarkCmd  `cmd:"" help:"Nexmark queries as in-process jobs: events per second and per CPU-second, peak RSS."`
	Memory   BenchMemoryCmd   `cmd:"" help:"Memory of rsql server running a topic -> tumble -> topic job (peak RSS, anonymous and mapped)."`
	Latency  BenchLatencyCmd  `cmd:"" help:"Born-to-delivery latency through a job with exactly-once topic output (p50/p90/p99/max)."`
	Idle     BenchIdleCmd     `cmd:"" help:"CPU and checkpoints of rsql server running idle jobs (a topic that receives nothing)."`
	Pgsink   BenchPgsinkCmd   `cmd:"" help:"Job throughput into a PostgreSQL table (topic -> COUNT/SUM by key -> upserts), beside the same job into a topic."`
	View     BenchViewCmd     `cmd:"" help:"A materialized view of many keys across a restart: the first pull query's time and the peak RSS."`
}
