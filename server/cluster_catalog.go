package server

import (
	"encoding/json"
	"fmt"
	"sort"
)

// snapshot returns the catalog as canonical JSON (streams by name, jobs by id), the form
// shared between instances through the checkpoint store.
func (c *Catalog) snapshot() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := catalogFile{NextJob: c.nextJob}
	for _, s := range c.streams {
		f.Streams = append(f.Streams, s)
	}
	for _, j := range c.jobs {
		f.Jobs = append(f.Jobs, j)
	}
	sort.Slice(f.Streams, func(i, j int) bool { return f.Streams[i].Name < f.Streams[j].Name })
	sort.Slice(f.Jobs, func(i, j int) bool { return f.Jobs[i].ID < f.Jobs[j].ID })
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
	c.streams = map[string]*StreamDef{}
	c.jobs = map[string]*JobDef{}
	for _, s := range f.Streams {
		c.streams[key(s.Name)] = s
	}
	for _, j := range f.Jobs {
		c.jobs[j.ID] = j
	}
	c.nextJob = max(f.NextJob, 1)
	return c.saveLocked()
}
