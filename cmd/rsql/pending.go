package main

// Subcommands whose implementation is in progress; each file that implements one removes it
// from here.


type ServerCmd struct{}

func (c *ServerCmd) Run(cm *Common) error { return &exitError{"rsql server is not built yet"} }

