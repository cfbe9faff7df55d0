package server

import (
	"encoding/json"
	"fmt"
)

// snapshot returns the catalog as canonical JSON (streams by name, jobs by id, functions
// by name), the form
// shared between instances through the checkpoint store.
func (c *Catalog) snapshot() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.fileLocked()
	return json.Marshal(&f)
}

// replace makes the catalog exactly what data (a snapshot) holds, and persists it.
func (c *Catalog) replace(data []byte) error {
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: shared catalog: %v", ErrCatalogCorrupt, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked(f)
	return c.saveLocked()
}

// sharedCatalog is the catalog as cluster.CatalogSync shares it between instances.
type sharedCatalog struct{ c *Catalog }

func (s sharedCatalog) Snapshot() ([]byte, error) { return s.c.snapshot() }
func (s sharedCatalog) Replace(data []byte) error { return s.c.replace(data) }
