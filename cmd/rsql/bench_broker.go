package main

// BenchBrokerCmd measures the bundled broker through the RocketMQ protocol.
type BenchBrokerCmd struct{}

func (c *BenchBrokerCmd) Run(cm *Common) error {
	return &exitError{"rsql bench broker is not built yet"}
}
