package namesrv

import "rsql/internal/durable"

// WithFS returns cfg with kvConfig.json read and replaced through fs.
func WithFS(cfg Config, fs durable.StateFS) Config {
	cfg.fs = fs
	return cfg
}
