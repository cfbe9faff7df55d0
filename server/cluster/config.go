package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rsql/state"
)

// Config configures cluster mode.
type Config struct {
	// Checkpoints is the shared store (required).
	Checkpoints *state.PostgresCheckpointStore
	// Name is the instance's stable name (default: kept in the data directory).
	Name string
	// Addr is shown to other members (diagnostics).
	Addr string
	// Tick is how often the lease is renewed and ownership reconciled (default 500ms).
	Tick time.Duration
	// Lease is how long a member stays live without renewing (default 3s).
	Lease time.Duration
}

// InstanceName returns the instance's stable name, kept in the data directory (created on
// first use).
func InstanceName(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "instance-name")
	if b, err := os.ReadFile(p); err == nil {
		if n := strings.TrimSpace(string(b)); n != "" {
			return n, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	n := "rsql-" + hex.EncodeToString(r[:])
	if err := os.WriteFile(p, []byte(n+"\n"), 0o644); err != nil {
		return "", err
	}
	return n, nil
}
