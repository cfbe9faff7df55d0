package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"rsql/connectors/options"
	"rsql/internal/durable"
	"rsql/planner"
	"rsql/sql"
	"rsql/udf"
)

// StreamDef is a declared stream or materialized view as the catalog stores it.
type StreamDef struct {
	Name           string            `json:"name"`
	Columns        []ColumnDef       `json:"columns"`
	EventTime      string            `json:"event_time,omitempty"`
	WatermarkDelay int64             `json:"watermark_delay_ms,omitempty"`
	Options        map[string]string `json:"options"`
	IsView         bool              `json:"is_view,omitempty"`
	// IsTable: CREATE TABLE (versions by PrimaryKey, or a lookup table).
	IsTable    bool     `json:"is_table,omitempty"`
	PrimaryKey []string `json:"primary_key,omitempty"`
	// Changelog: a table that CREATE STREAM ... AS SELECT made of an updating query (its
	// job writes the query's changes keyed by PrimaryKey; docs/sql.md, "Changelogs"). DROP
	// STREAM drops it as DROP TABLE does.
	Changelog bool `json:"changelog,omitempty"`
	// Job is the id of the job that writes this stream or view, if any.
	Job string `json:"job,omitempty"`
	// Statement is the CREATE text, for SHOW and DESCRIBE.
	Statement string `json:"statement"`
}

// ColumnDef is a column as stored: name and type text (e.g. "DECIMAL(10,2)").
type ColumnDef struct {
	Name      string `json:"name"`
	Kind      uint8  `json:"kind"`
	Precision uint8  `json:"precision,omitempty"`
	Scale     uint8  `json:"scale,omitempty"`
}

// JobDef is a continuous query as the catalog stores it.
type JobDef struct {
	ID        string `json:"id"`
	Statement string `json:"statement"`
	// State is the desired state: RUNNING, PAUSED, FINISHED, FAILED or TERMINATED.
	State JobState `json:"state"`
	Error string   `json:"error,omitempty"`
	// Sink is the stream or view the job writes.
	Sink string `json:"sink"`
	// Sources are the streams the job reads.
	Sources []string `json:"sources"`
	// Functions are the user-defined functions and aggregates the job's query calls
	// (also through SQL functions): they cannot be dropped or replaced while it runs.
	Functions []string `json:"functions,omitempty"`
	// StateTTL is the session's state_ttl when the job was created, in milliseconds: state
	// without a natural end (DISTINCT, deduplication) is forgotten that far behind the
	// watermark.
	StateTTL int64 `json:"state_ttl,omitempty"`
	// Layout is the plan layout the job was created with (planner.Options.Layout; 0, as
	// jobs stored before layouts were recorded have it, is planner.LayoutFirst): a job is
	// planned again at each start, and its checkpoints only fit stages of the same shape.
	Layout int `json:"layout,omitempty"`
	// Last holds the job's counters when it last stopped in this or another process (SHOW
	// JOBS shows them for a job that is not running).
	Last *JobCounters `json:"last,omitempty"`
}

// newJobLayout is the plan layout a job created now records (a variable for the test of
// jobs created by an older release).
var newJobLayout = planner.LayoutCurrent

// planOptions are the planner's options for the job's query writing sink.
func (d *JobDef) planOptions(sink planner.SinkSpec) planner.Options {
	layout := d.Layout
	if layout == 0 {
		layout = planner.LayoutFirst
	}
	return planner.Options{Job: d.ID, Sink: sink, StateTTL: d.StateTTL, Layout: layout}
}

// JobCounters are a job's counters as SHOW JOBS shows them.
type JobCounters struct {
	RecordsIn  int64 `json:"records_in"`
	RecordsOut int64 `json:"records_out"`
	Late       int64 `json:"late"`
	Bad        int64 `json:"bad"`
	// Watermark is epoch milliseconds; nil before the first.
	Watermark *int64 `json:"watermark,omitempty"`
}

// Schema returns the stream's columns as a sql.Schema.
func (d *StreamDef) Schema() sql.Schema {
	s := make(sql.Schema, len(d.Columns))
	for i, c := range d.Columns {
		s[i] = sql.Column{Name: c.Name, Type: sql.Type{Kind: sql.Kind(c.Kind), Precision: c.Precision, Scale: c.Scale}}
	}
	return s
}

// StreamOptions are the stream's options parsed (options.Of; docs/architecture.md, "Stream
// options are parsed once"): the engine reads its connector, topic, path and format here,
// never from Options, which stays the catalog's record (SHOW CREATE, the catalog on disk).
// They were checked when the stream was declared and are stored with their defaults
// (withDefaults); a view's connector is "view".
func (d *StreamDef) StreamOptions() options.StreamOptions {
	o, err := options.Of(d.Options)
	if err != nil {
		// A value stored before it was checked: the options the engine reads as given.
		o.Topic, o.Path = d.Options["topic"], d.Options["path"]
		if f := d.Options["format"]; f != "" {
			o.Format = f
		}
	}
	return o
}

// Kind is what the definition is, as DROP names it: STREAM, TABLE or VIEW.
func (d *StreamDef) Kind() sql.DropKind {
	switch {
	case d.IsView:
		return sql.DropView
	case d.IsTable:
		return sql.DropTable
	}
	return sql.DropStream
}

// Relation returns the stream as the binder sees it.
func (d *StreamDef) Relation() *sql.Relation {
	schema := d.Schema()
	et := -1
	if d.EventTime != "" {
		et = schema.Index(d.EventTime)
	}
	r := &sql.Relation{Name: d.Name, Schema: schema, IsView: d.IsView, Options: d.Options,
		EventTime: et, WatermarkDelay: d.WatermarkDelay, IsTable: d.IsTable}
	for _, k := range d.PrimaryKey {
		r.PrimaryKey = append(r.PrimaryKey, schema.Index(k))
	}
	if kind, _ := options.Lookup(r.Connector()); d.IsTable && (r.Connector() == "broker" || r.Connector() == "kafka" || r.Connector() == "file" || kind.Changelog) {
		// A versioned table's records may say they end their key (docs/sql.md, Joins).
		r.Schema = append(append(sql.Schema{}, schema...), sql.Column{Name: sql.ChangeColumn, Type: sql.TypeVarchar})
	}
	return r
}

func columnDefs(s sql.Schema) []ColumnDef {
	out := make([]ColumnDef, len(s))
	for i, c := range s {
		out[i] = ColumnDef{Name: c.Name, Kind: uint8(c.Type.Kind), Precision: c.Type.Precision, Scale: c.Type.Scale}
	}
	return out
}

// FunctionDef is a user-defined function or aggregate as the catalog stores it (CREATE
// FUNCTION / CREATE AGGREGATE). A wasm function's module bytes are in the catalog, so a
// restart or another instance of a cluster runs the same code.
type FunctionDef struct {
	Name      string      `json:"name"`
	Aggregate bool        `json:"aggregate,omitempty"`
	Params    []ColumnDef `json:"params"`
	Returns   ColumnDef   `json:"returns"`
	// Table, for a table function (RETURNS TABLE (...)), is the columns of its rows.
	Table    []ColumnDef       `json:"table,omitempty"`
	Language string            `json:"language"`
	Body     string            `json:"body"`
	Module   []byte            `json:"module,omitempty"`
	Options  map[string]string `json:"options,omitempty"`
	// Statement is the CREATE text, for DESCRIBE FUNCTION.
	Statement string `json:"statement"`
}

// Spec returns the function as the udf package runs it.
func (d *FunctionDef) Spec() udf.Spec {
	ps := make(sql.Schema, len(d.Params))
	for i, c := range d.Params {
		ps[i] = sql.Column{Name: c.Name, Type: c.typ()}
	}
	var table sql.Schema
	for _, c := range d.Table {
		table = append(table, sql.Column{Name: c.Name, Type: c.typ()})
	}
	return udf.Spec{Name: d.Name, Aggregate: d.Aggregate, Params: ps, Returns: d.Returns.typ(), Table: table, Language: d.Language,
		Body: d.Body, Module: d.Module, Options: d.Options}
}

func (c ColumnDef) typ() sql.Type {
	return sql.Type{Kind: sql.Kind(c.Kind), Precision: c.Precision, Scale: c.Scale}
}

// Catalog holds streams, views and jobs, persisted as one JSON file written atomically
// (write to a temporary file, fsync, rename). All methods are safe for concurrent use; mu
// guards every field.
type Catalog struct {
	mu      sync.Mutex
	fs      durable.StateFS // the file's reads and replacements
	path    string          // "" for a catalog that is not persisted
	streams map[string]*StreamDef
	jobs    map[string]*JobDef
	funcs   map[string]*FunctionDef
	users   map[string]*UserDef // by lower-case name (users.go)
	nextJob int
}

type catalogFile struct {
	Streams   []*StreamDef   `json:"streams"`
	Jobs      []*JobDef      `json:"jobs"`
	Functions []*FunctionDef `json:"functions,omitempty"`
	NextJob   int            `json:"next_job"`
	Users     []*UserDef     `json:"users,omitempty"`
}

// file returns the catalog's content as written to its file and shared in a cluster:
// streams by name, jobs by id, functions by name. c.mu must be held.
func (c *Catalog) fileLocked() catalogFile {
	f := catalogFile{NextJob: c.nextJob}
	for _, s := range c.streams {
		f.Streams = append(f.Streams, s)
	}
	for _, j := range c.jobs {
		f.Jobs = append(f.Jobs, j)
	}
	for _, d := range c.funcs {
		f.Functions = append(f.Functions, d)
	}
	for _, u := range c.users {
		f.Users = append(f.Users, u)
	}
	sort.Slice(f.Streams, func(i, j int) bool { return f.Streams[i].Name < f.Streams[j].Name })
	sort.Slice(f.Jobs, func(i, j int) bool { return f.Jobs[i].ID < f.Jobs[j].ID })
	sort.Slice(f.Functions, func(i, j int) bool { return f.Functions[i].Name < f.Functions[j].Name })
	sort.Slice(f.Users, func(i, j int) bool { return f.Users[i].Name < f.Users[j].Name })
	return f
}

// loadLocked makes the catalog what f holds. c.mu must be held.
func (c *Catalog) loadLocked(f catalogFile) {
	c.streams = map[string]*StreamDef{}
	c.jobs = map[string]*JobDef{}
	c.funcs = map[string]*FunctionDef{}
	c.users = map[string]*UserDef{}
	for _, s := range f.Streams {
		c.streams[key(s.Name)] = s
	}
	for _, j := range f.Jobs {
		c.jobs[j.ID] = j
	}
	for _, d := range f.Functions {
		c.funcs[key(d.Name)] = d
	}
	for _, u := range f.Users {
		c.users[key(u.Name)] = u
	}
	c.nextJob = max(f.NextJob, 1)
}

// ErrCatalogCorrupt says the catalog file could not be read.
var ErrCatalogCorrupt = errors.New("catalog file is corrupt")

// OpenCatalog loads the catalog at path, or starts an empty one when the file does not exist.
// An empty path gives an in-memory catalog.
func OpenCatalog(path string) (*Catalog, error) { return OpenCatalogFS(durable.OS, path) }

// OpenCatalogFS is OpenCatalog reading and replacing the file through fs (tests fail its
// steps).
func OpenCatalogFS(fs durable.StateFS, path string) (*Catalog, error) {
	c := &Catalog{fs: fs, path: path, streams: map[string]*StreamDef{}, jobs: map[string]*JobDef{}, funcs: map[string]*FunctionDef{}, users: map[string]*UserDef{}, nextJob: 1}
	if path == "" {
		return c, nil
	}
	data, err := fs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCatalogCorrupt, path, err)
	}
	c.loadLocked(f)
	return c, nil
}

func key(name string) string { return strings.ToLower(name) }

// saveLocked writes the catalog file. c.mu must be held.
func (c *Catalog) saveLocked() error {
	if c.path == "" {
		return nil
	}
	f := c.fileLocked()
	data, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return err
	}
	if err := c.fs.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	// 0600: the file holds the users' password secrets.
	return durable.WriteFile(c.fs, c.path, data, 0o600)
}

// Relation implements sql.Catalog.
func (c *Catalog) Relation(name string) (*sql.Relation, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.streams[key(name)]
	if !ok {
		return nil, false
	}
	return d.Relation(), true
}

// Stream returns a copy of the definition of the stream or view named name.
func (c *Catalog) Stream(name string) (StreamDef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.streams[key(name)]
	if !ok {
		return StreamDef{}, false
	}
	return *d, true
}

// Streams returns copies of all stream and view definitions, sorted by name.
func (c *Catalog) Streams() []StreamDef {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]StreamDef, 0, len(c.streams))
	for _, d := range c.streams {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AddStream adds a stream or view. It fails with a 42710 *sql.Error when the name is taken.
func (c *Catalog) AddStream(d StreamDef) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.streams[key(d.Name)]; ok {
		return sql.Errorf(sql.CodeDuplicate, "stream or view %q already exists", d.Name)
	}
	c.streams[key(d.Name)] = &d
	if err := c.saveLocked(); err != nil {
		delete(c.streams, key(d.Name))
		return err
	}
	return nil
}

// AddStreamAndJob adds a derived stream (or view) and the job that writes it in one step, so
// a failure leaves neither. d may be nil for INSERT INTO jobs. It returns the job's id.
func (c *Catalog) AddStreamAndJob(d *StreamDef, j JobDef) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d != nil {
		if _, ok := c.streams[key(d.Name)]; ok {
			return "", sql.Errorf(sql.CodeDuplicate, "stream or view %q already exists", d.Name)
		}
	}
	j.ID = fmt.Sprintf("job-%d", c.nextJob)
	c.nextJob++
	if d != nil {
		d.Job = j.ID
		c.streams[key(d.Name)] = d
	}
	c.jobs[j.ID] = &j
	if err := c.saveLocked(); err != nil {
		if d != nil {
			delete(c.streams, key(d.Name))
		}
		delete(c.jobs, j.ID)
		return "", err
	}
	return j.ID, nil
}

// ReplaceStream puts d in place of the stream or view of the same name (CREATE OR REPLACE),
// adding it when there is none, and records j (when not nil: d is written by a new job) in
// the same step. It refuses (55006) while a live job other than the stream's own reads or
// writes it. The stream's own job, if live, is marked TERMINATED; its id is returned so the
// caller stops it, with the new job's id.
func (c *Catalog) ReplaceStream(d StreamDef, j *JobDef) (oldJob, newJob string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, exists := c.streams[key(d.Name)]
	if exists {
		for _, o := range c.jobs {
			if !o.live() || o.ID == old.Job {
				continue
			}
			if strings.EqualFold(o.Sink, old.Name) {
				return "", "", sql.Errorf(sql.CodeInUse, "cannot replace %q: job %s writes it (TERMINATE JOB %s first)", old.Name, o.ID, o.ID)
			}
		}
		if readers := c.readersLocked(old.Name, old.Job); len(readers) > 0 {
			return "", "", sql.Errorf(sql.CodeInUse, "cannot replace %q: %s", old.Name, readersText(readers))
		}
	}
	saved := map[string]JobDef{}
	if exists && old.Job != "" {
		if o, ok := c.jobs[old.Job]; ok && o.live() {
			saved[o.ID] = *o
			o.State = JobTerminated
			o.Error = "replaced by CREATE OR REPLACE"
			oldJob = o.ID
		}
	}
	if j != nil {
		nj := *j
		nj.ID = fmt.Sprintf("job-%d", c.nextJob)
		c.nextJob++
		c.jobs[nj.ID] = &nj
		d.Job, newJob = nj.ID, nj.ID
	}
	c.streams[key(d.Name)] = &d
	if err := c.saveLocked(); err != nil {
		if exists {
			c.streams[key(d.Name)] = old
		} else {
			delete(c.streams, key(d.Name))
		}
		for id, o := range saved {
			*c.jobs[id] = o
		}
		if newJob != "" {
			delete(c.jobs, newJob)
		}
		return "", "", err
	}
	return oldJob, newJob, nil
}

// DropStream removes a stream or view. It refuses (55006) while a job that is not
// terminated reads it.
func (c *Catalog) DropStream(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.streams[key(name)]
	if !ok {
		return sql.Errorf(sql.CodeUnknownTable, "stream or view %q does not exist", name)
	}
	if readers := c.readersLocked(d.Name, ""); len(readers) > 0 {
		return sql.Errorf(sql.CodeInUse, "cannot drop %q: %s", d.Name, readersText(readers))
	}
	delete(c.streams, key(name))
	var stopped *JobDef
	var was JobState
	if d.Job != "" {
		if j, ok := c.jobs[d.Job]; ok && j.live() {
			stopped, was = j, j.State
			j.State = JobTerminated
		}
	}
	if err := c.saveLocked(); err != nil {
		// What could not be stored is not served either: the stream and its job stay.
		c.streams[key(name)] = d
		if stopped != nil {
			stopped.State = was
		}
		return err
	}
	return nil
}

func (j *JobDef) live() bool { return j.State == JobRunning || j.State == JobPaused }

// Jobs returns copies of all jobs, sorted by id number.
func (c *Catalog) Jobs() []JobDef {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]JobDef, 0, len(c.jobs))
	for _, j := range c.jobs {
		out = append(out, *j)
	}
	sort.Slice(out, func(a, b int) bool { return jobNum(out[a].ID) < jobNum(out[b].ID) })
	return out
}

// readersLocked returns the ids of the live jobs (but except) that read stream name, in
// job order.
func (c *Catalog) readersLocked(name, except string) []string {
	var out []string
	for _, j := range c.jobs {
		if !j.live() || j.ID == except {
			continue
		}
		for _, s := range j.Sources {
			if strings.EqualFold(s, name) {
				out = append(out, j.ID)
				break
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return jobNum(out[a]) < jobNum(out[b]) })
	return out
}

// readersText says which jobs read a stream, all of them, and what to do about it.
func readersText(ids []string) string {
	if len(ids) == 1 {
		return fmt.Sprintf("job %s reads it (TERMINATE JOB %s first)", ids[0], ids[0])
	}
	return fmt.Sprintf("jobs %s read it (TERMINATE JOB each of them first)", strings.Join(ids, ", "))
}

func jobNum(id string) int {
	var n int
	fmt.Sscanf(id, "job-%d", &n)
	return n
}

// Job returns a copy of the job with the given id.
func (c *Catalog) Job(id string) (JobDef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id = strings.ToLower(id)
	if _, err := strconv.Atoi(id); err == nil {
		id = "job-" + id // PAUSE JOB 3 names job-3
	}
	j, ok := c.jobs[id]
	if !ok {
		return JobDef{}, false
	}
	return *j, true
}

// SetJobCounters records a stopped job's counters.
func (c *Catalog) SetJobCounters(id string, jc JobCounters) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[id]
	if !ok {
		return sql.Errorf(sql.CodeUnknownTable, "job %q does not exist", id)
	}
	last := j.Last
	j.Last = &jc
	if err := c.saveLocked(); err != nil {
		j.Last = last
		return err
	}
	return nil
}

// SetJobState records a job's state (and error text for FAILED).
func (c *Catalog) SetJobState(id string, state JobState, errText string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[id]
	if !ok {
		return sql.Errorf(sql.CodeUnknownTable, "job %q does not exist", id)
	}
	oldState, oldErr := j.State, j.Error
	j.State, j.Error = state, errText
	if err := c.saveLocked(); err != nil {
		j.State, j.Error = oldState, oldErr
		return err
	}
	return nil
}

// Function returns a copy of the user function or aggregate named name.
func (c *Catalog) Function(name string) (FunctionDef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.funcs[key(name)]
	if !ok {
		return FunctionDef{}, false
	}
	return *d, true
}

// Functions returns copies of all user functions and aggregates, sorted by name.
func (c *Catalog) Functions() []FunctionDef {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]FunctionDef, 0, len(c.funcs))
	for _, d := range c.funcs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// usedByLocked returns a live job that calls function name, if any. c.mu must be held.
func (c *Catalog) usedByLocked(name string) (string, bool) {
	ids := make([]string, 0, len(c.jobs))
	for id, j := range c.jobs {
		if !j.live() {
			continue
		}
		for _, f := range j.Functions {
			if strings.EqualFold(f, name) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return "", false
	}
	sort.Slice(ids, func(a, b int) bool { return jobNum(ids[a]) < jobNum(ids[b]) })
	return ids[0], true
}

// AddFunction stores a user function or aggregate. An existing one of that name is
// replaced when replace is set (refused, 55006, while a live job calls it), else the call
// fails with 42723.
func (c *Catalog) AddFunction(d FunctionDef, replace bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, exists := c.funcs[key(d.Name)]
	if exists {
		if !replace {
			return sql.Errorf(sql.CodeDuplicateFunction, "function %q already exists (CREATE OR REPLACE replaces it, IF NOT EXISTS keeps it)", old.Name)
		}
		if id, used := c.usedByLocked(old.Name); used {
			return sql.Errorf(sql.CodeInUse, "cannot replace function %q: job %s calls it (TERMINATE JOB %s first)", old.Name, id, id)
		}
	}
	c.funcs[key(d.Name)] = &d
	if err := c.saveLocked(); err != nil {
		if exists {
			c.funcs[key(d.Name)] = old
		} else {
			delete(c.funcs, key(d.Name))
		}
		return err
	}
	return nil
}

// DropFunction removes a user function or aggregate. It refuses (55006) while a live job
// calls it.
func (c *Catalog) DropFunction(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.funcs[key(name)]
	if !ok {
		return sql.Errorf(sql.CodeUndefinedFunction, "function %q does not exist", name)
	}
	if id, used := c.usedByLocked(d.Name); used {
		return sql.Errorf(sql.CodeInUse, "cannot drop function %q: job %s calls it (TERMINATE JOB %s first)", d.Name, id, id)
	}
	delete(c.funcs, key(name))
	if err := c.saveLocked(); err != nil {
		c.funcs[key(name)] = d
		return err
	}
	return nil
}
