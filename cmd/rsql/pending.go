package main

// Subcommands whose implementation is in progress; each file that implements one removes it
// from here.

type ShellCmd struct{}

func (c *ShellCmd) Run(cm *Common) error { return &exitError{"the shell is not built yet"} }

type ServerCmd struct{}

func (c *ServerCmd) Run(cm *Common) error { return &exitError{"rsql server is not built yet"} }

type BrokerCmd struct{}

func (c *BrokerCmd) Run(cm *Common) error { return &exitError{"rsql broker is not built yet"} }

type ProduceCmd struct{}

func (c *ProduceCmd) Run(cm *Common) error { return &exitError{"rsql produce is not built yet"} }

type ConsumeCmd struct{}

func (c *ConsumeCmd) Run(cm *Common) error { return &exitError{"rsql consume is not built yet"} }

type BenchBrokerCmd struct{}

func (c *BenchBrokerCmd) Run(cm *Common) error { return &exitError{"not built yet"} }

type VersionCmd struct{}

func (c *VersionCmd) Run(cm *Common) error { return &exitError{"not built yet"} }
