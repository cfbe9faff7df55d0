package console

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"rsql/broker"
	"rsql/server/auth"
	"rsql/server/pgwire"
	"rsql/sql"
)

//go:embed index.html console.css console.js
var consoleFiles embed.FS

// console serves the API and the pages.
type console struct {
	e    Engine
	b    *broker.Broker // nil without a bundled broker: topics are then not available
	hist *consoleHistory
	mux  *http.ServeMux
	done chan struct{}
}

func newConsole(e Engine, b *broker.Broker) *console {
	c := &console{e: e, b: b, hist: newConsoleHistory(e, consoleSampleEvery, consoleWindow), mux: http.NewServeMux(), done: make(chan struct{})}
	c.mux.HandleFunc("GET /api/v1/jobs", c.listJobs)
	c.mux.HandleFunc("GET /api/v1/jobs/{id}", c.getJob)
	c.mux.HandleFunc("GET /api/v1/jobs/{id}/plan", c.getPlan)
	c.mux.HandleFunc("POST /api/v1/jobs/{id}/{action}", c.jobAction)
	c.mux.HandleFunc("GET /api/v1/streams", c.listStreams)
	c.mux.HandleFunc("GET /api/v1/streams/{name}", c.getStream)
	c.mux.HandleFunc("GET /api/v1/topics", c.listTopics)
	c.mux.HandleFunc("GET /api/v1/topics/{topic}", c.getTopic)
	c.mux.HandleFunc("GET /api/v1/topics/{topic}/queues/{queue}/messages", c.messages)
	c.mux.HandleFunc("POST /api/v1/sql", c.runSQL)
	c.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "", "no API endpoint "+r.Method+" "+r.URL.Path+" (docs/operations.md lists them)")
	})
	static := fs.FS(consoleFiles)
	files := http.FileServerFS(static)
	c.mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
	c.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	go c.hist.run(c.done)
	return c
}

func (c *console) close() { close(c.done) }

// Console is the web console and its API behind the wire's authentication (auth.go).
type Console struct {
	c    *console
	auth *consoleAuth
}

// New starts the console over e, with the topics of b (nil: no bundled broker), its
// requests authenticated by method against e's users. Close stops its history sampler.
func New(e Engine, b *broker.Broker, method auth.Method) *Console {
	c := newConsole(e, b)
	return &Console{c: c, auth: &consoleAuth{method: method, users: e.Users(), next: c}}
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.auth.ServeHTTP(w, r) }

// Close stops the history sampler.
func (c *Console) Close() { c.c.close() }

func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
	h.Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		apiError(w, http.StatusForbidden, "", "cross-origin "+r.Method+" refused: the console's API accepts changes only from its own pages")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a request has no Origin header (not from a browser page) or
// one naming the host it was sent to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// apiErr is the JSON of an error.
type apiErr struct {
	Code     string `json:"code,omitempty"`
	Message  string `json:"message"`
	Position int    `json:"position,omitempty"` // 1-based character position in the statement text
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]apiErr{"error": {Code: code, Message: msg}})
}

// engineError answers an error of the engine: a *sql.Error keeps its SQLSTATE, and its
// status follows the code's class (42: 400 or 404 for unknown objects, 55: 409, 0A: 501).
func engineError(w http.ResponseWriter, err error) {
	var se *sql.Error
	if !errors.As(err, &se) {
		apiError(w, http.StatusInternalServerError, sql.CodeInternal, err.Error())
		return
	}
	status := http.StatusBadRequest
	switch {
	case se.Code == sql.CodeUnknownTable:
		status = http.StatusNotFound
	case se.Code == sql.CodeInUse || se.Code == sql.CodeInvalidValue:
		status = http.StatusConflict
	case se.Code == sql.CodeNotSupported:
		status = http.StatusNotImplemented
	case se.Code == sql.CodeInternal:
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]apiErr{"error": {Code: se.Code, Message: se.Message}})
}

// sqlErr describes err for a client that holds text, the statement it came from.
func sqlErr(err error, text string) apiErr {
	var se *sql.Error
	if !errors.As(err, &se) {
		return apiErr{Code: sql.CodeInternal, Message: err.Error()}
	}
	return apiErr{Code: se.Code, Message: se.Message, Position: pgwire.ErrorPosition(se, text), Line: se.Line, Column: se.Column}
}

// jsonValue is v as a JSON value: null, true/false, a number for INT, BIGINT and finite
// DOUBLE, and PostgreSQL's text for everything else (DECIMAL keeps every digit).
func jsonValue(v sql.Value, t sql.Type) any {
	switch v.K {
	case sql.KindNull:
		return nil
	case sql.KindBool:
		return v.I != 0
	case sql.KindInt, sql.KindBigInt:
		if t.Kind != sql.KindDouble {
			return v.I
		}
	case sql.KindDouble:
		if !math.IsNaN(v.F()) && !math.IsInf(v.F(), 0) && t.Kind != sql.KindInt && t.Kind != sql.KindBigInt {
			return v.F()
		}
	}
	return string(pgwire.AppendText(nil, v, t))
}

// wmText is a watermark or event time as RFC 3339 text with milliseconds, or nil.
func wmText(ms int64) *string {
	if !finiteWM(ms) {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}

// queryInt reads an integer query parameter within [lo, hi], or def when absent.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errors.New(name + "=" + strconv.Quote(s) + ": want a whole number from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10))
	}
	return n, nil
}
