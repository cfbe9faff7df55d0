package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds a Chromium (Debian's chromium package: scripts/deps.sh test installs
// it) or Chrome.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser drives one headless Chromium tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string // where screenshots go
	docs bool   // they go to docs/

	mu       sync.Mutex
	problems []string // exceptions and errors the pages logged
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("headless Chromium not found (Debian: apt-get install chromium; scripts/deps.sh test installs it): the console's browser test needs it")
	}
	// The flags the machines this runs on need: no sandbox as root, and no background
	// connections (the network is closed; refused connections slow Chromium down).
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(1400, 1000))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	b := &browser{t: t, ctx: ctx, dir: t.TempDir()}
	// Exceptions, Content-Security-Policy refusals and other errors the pages log; an
	// answer with an error status (the SQL box's syntax error) is logged too and is not one.
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !strings.Contains(m.Text, "Failed to load resource") {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	if os.Getenv("RSQL_CONSOLE_SCREENSHOTS") == "docs" {
		b.dir, b.docs = filepath.Join(repoRoot(), "docs"), true
	}
	return b
}

// do runs actions with a time limit.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression and decodes its JSON value into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("JSON.stringify("+expr+")"))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		b.t.Fatalf("evaluate %s: %q: %v", expr, s, err)
	}
}

// waitJS waits up to d until the JavaScript expression is true; on time-out it fails with
// the value of show.
func (b *browser) waitJS(d time.Duration, cond, show string) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var ok bool
		b.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var got any
			b.eval(show, &got)
			b.t.Fatalf("after %v, not %s: %v", d, cond, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkConsole fails the test if a page logged an error.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("the page logged %s", p)
	}
}

// screenshot saves the whole page as console-<name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		b.t.Fatalf("screenshot %s is not a PNG", name)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// The console in a real browser: the job list, a job page that shows a non-zero rate, its
// plan graph's nodes and the charts' points, pause and resume from the page, a topic's
// decoded messages, streams, and the SQL box (a pull result, an error with its caret, a
// push query stopped from the page). RSQL_CONSOLE_SCREENSHOTS=docs writes the screenshots
// into docs/ (docs/operations.md shows them).
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	cs := startConsoleServer(t)
	cs.feed(t)
	base := "http://" + cs.httpAddr + "/"

	b.do("open the jobs page", chromedp.Navigate(base+"#/jobs"))
	b.waitJS(40*time.Second, `(() => { const r = document.querySelector('tr[data-job="job-1"]'); return r && r.cells[2].textContent !== '0/s' && r.cells[2].textContent !== '–'; })()`,
		`document.querySelector('#jobs') && document.querySelector('#jobs').innerText`)

	b.do("open the job page", chromedp.Click(chromedp.CSS(`tr[data-job="job-1"] a`)))
	b.waitJS(10*time.Second, `location.hash === '#/jobs/job-1'`, `location.hash`)
	// A non-zero rate on the page, a plan graph with every node, rates on its edges, and
	// charts with points.
	b.waitJS(30*time.Second, `(() => { const v = document.querySelector('#tile-input-rate .v'); return v && /[1-9]/.test(v.textContent); })()`,
		`document.querySelector('#job-tiles') && document.querySelector('#job-tiles').innerText`)
	var nodes []string
	b.eval(`Array.from(document.querySelectorAll('#plan-graph g.node')).map(n => n.dataset.node + '=' + n.dataset.kind)`, &nodes)
	want := []string{"s0.in0=source", "s0.op0=filter", "s0.out=exchange", "s1.in0=edge", "s1.op0=aggregate", "s1.op1=project", "s1.out=sink"}
	if strings.Join(nodes, " ") != strings.Join(want, " ") {
		t.Errorf("plan graph nodes %v, want %v", nodes, want)
	}
	var labels []string
	b.eval(`Array.from(document.querySelectorAll('#plan-graph g.node text:first-of-type')).map(t => t.textContent)`, &labels)
	if len(labels) != 7 || labels[0] != "Source orders" || labels[4] != "Aggregate" || labels[6] != "Sink totals" {
		t.Errorf("node labels %v", labels)
	}
	var edges int
	b.eval(`document.querySelectorAll('#plan-graph g.link path').length`, &edges)
	if edges != 6 {
		t.Errorf("%d edges drawn, want 6", edges)
	}
	b.waitJS(20*time.Second, `Array.from(document.querySelectorAll('#plan-graph g.link')).some(e => Number(e.dataset.rate) > 0 && /\/s$/.test(e.querySelector('text').textContent))`,
		`Array.from(document.querySelectorAll('#plan-graph g.link')).map(e => e.dataset.edge + ' ' + e.dataset.rate)`)
	b.waitJS(20*time.Second, `Array.from(document.querySelectorAll('#plan-graph .stage text')).every(t => /watermark/.test(t.textContent))`,
		`Array.from(document.querySelectorAll('#plan-graph .stage text')).map(t => t.textContent)`)
	// The input-rate chart: at least two points, drawn as a line, the latest non-zero.
	b.waitJS(20*time.Second, `Number(document.querySelector('#chart-input_rate').dataset.points) >= 3`,
		`document.querySelector('#chart-input_rate').outerHTML.slice(0, 300)`)
	var chart struct {
		Points int
		Max    float64
		Line   string
	}
	b.eval(`(() => { const c = document.querySelector('#chart-input_rate'); return {Points: Number(c.dataset.points), Max: Number(c.dataset.max), Line: Array.from(c.querySelectorAll('polyline.series')).map(p => p.getAttribute('points')).join(' ')}; })()`, &chart)
	if chart.Max <= 0 || len(strings.Fields(chart.Line)) < 2 {
		t.Errorf("input-rate chart: %+v", chart)
	}
	for _, id := range []string{"output_rate", "lag", "checkpoint_ms"} {
		var n int
		b.eval(`document.querySelectorAll('#chart-`+id+`').length`, &n)
		if n != 1 {
			t.Errorf("chart %s: %d", id, n)
		}
	}
	b.waitJS(20*time.Second, `Number(document.querySelector('#chart-checkpoint_ms').dataset.points) >= 1`, `document.querySelector('#chart-checkpoint_ms').dataset.points`)
	if b.docs {
		time.Sleep(90 * time.Second) // a minute and a half of history for the charts in the docs
	}
	b.screenshot("job")

	// Pause and resume from the page.
	b.do("pause", chromedp.Click(chromedp.CSS(`#pause-job-1`)))
	b.waitJS(20*time.Second, `document.querySelector('#job-state').textContent === 'PAUSED'`, `document.querySelector('#job-state').textContent`)
	var jobs struct{ Jobs []apiJob }
	cs.apiGet(t, "/api/v1/jobs", &jobs)
	if jobs.Jobs[0].State != "PAUSED" || jobs.Jobs[0].Running {
		t.Errorf("after Pause: %+v", jobs.Jobs[0])
	}
	b.waitJS(10*time.Second, `!document.querySelector('#resume-job-1').disabled`, `document.querySelector('#resume-job-1').outerHTML`)
	b.do("resume", chromedp.Click(chromedp.CSS(`#resume-job-1`)))
	b.waitJS(20*time.Second, `document.querySelector('#job-state').textContent === 'RUNNING'`, `document.querySelector('#job-state').textContent`)
	cs.apiGet(t, "/api/v1/jobs", &jobs)
	if jobs.Jobs[0].State != "RUNNING" || !jobs.Jobs[0].Running {
		t.Errorf("after Resume: %+v", jobs.Jobs[0])
	}

	b.do("back to the jobs page", chromedp.Navigate(base+"#/jobs"))
	b.waitJS(30*time.Second, `(() => { const r = document.querySelector('tr[data-job="job-1"]'); return r && /RUNNING/.test(r.innerText) && /[1-9]/.test(r.cells[2].textContent); })()`,
		`document.querySelector('#jobs').innerText`)
	b.screenshot("jobs")

	b.do("streams", chromedp.Navigate(base+"#/streams"))
	b.waitJS(20*time.Second, `document.querySelector('[data-stream="orders"]') && document.querySelector('[data-stream="totals"]')`, `document.querySelector('#streams').innerText`)
	var ordersText string
	b.eval(`document.querySelector('[data-stream="orders"]').innerText`, &ordersText)
	for _, w := range []string{"id BIGINT", "ts TIMESTAMP", "watermark delay 1s", "queues = '2'", "job-1"} {
		if !strings.Contains(ordersText, w) {
			t.Errorf("stream orders shows no %q:\n%s", w, ordersText)
		}
	}
	b.screenshot("streams")

	// A topic: queues, the job's consumer group, the last messages decoded.
	b.do("topics", chromedp.Navigate(base+"#/topics"))
	b.waitJS(20*time.Second, `document.querySelector('tr[data-topic="orders"]')`, `document.querySelector('#topics').innerText`)
	b.do("topic orders", chromedp.Click(chromedp.CSS(`tr[data-topic="orders"] a`)))
	b.waitJS(20*time.Second, `document.querySelectorAll('#messages-table tbody tr').length === 20 && document.querySelector('#groups')`,
		`document.querySelector('#main').innerText.slice(0, 2000)`)
	var heads []string
	b.eval(`Array.from(document.querySelectorAll('#messages-table thead th')).map(t => t.textContent)`, &heads)
	if strings.Join(heads, ",") != "Offset,Stored,Key,id,user_id,amount,ts" {
		t.Errorf("message columns %v", heads)
	}
	var row []string
	b.eval(`Array.from(document.querySelector('#messages-table tbody tr').cells).map(c => c.textContent)`, &row)
	if len(row) != 7 || !strings.HasPrefix(row[4], "u") || row[6][:2] != "20" {
		t.Errorf("newest message row %v", row)
	} else if id, err := strconv.Atoi(row[3]); err != nil || row[4] != "u"+strconv.Itoa(id%4) {
		t.Errorf("newest message row %v: user_id is not u<id mod 4>", row)
	}
	var stray bool
	b.eval(`/\bnull\b|undefined/.test(document.querySelector('#main').innerText)`, &stray)
	if stray {
		t.Error("the topic page shows null or undefined")
	}
	var group string
	b.eval(`document.querySelector('#groups tbody tr td').textContent`, &group)
	if group != "rsql-job-1" {
		t.Errorf("consumer group %q", group)
	}
	b.screenshot("topic")

	// SQL: a pull result, an error with its caret, a push query stopped from the page.
	b.do("sql", chromedp.Navigate(base+"#/sql"))
	b.do("show streams", chromedp.SetValue(chromedp.CSS("#sql-input"), "SHOW STREAMS"), chromedp.Click(chromedp.CSS("#sql-run")))
	b.waitJS(20*time.Second, `document.querySelectorAll('.result-table tbody tr').length === 2 && /SHOW/.test(document.querySelector('.result .meta').textContent)`,
		`document.querySelector('#sql-output').innerText`)
	b.do("a syntax error", chromedp.SetValue(chromedp.CSS("#sql-input"), "SELECT id\nFRM orders"), chromedp.Click(chromedp.CSS("#sql-run")))
	b.waitJS(20*time.Second, `document.querySelector('#sql-error')`, `document.querySelector('#sql-output').innerText`)
	var errText string
	b.eval(`document.querySelector('#sql-error').innerText`, &errText)
	lines := strings.Split(errText, "\n")
	// FRM is taken for an alias of id, as PostgreSQL does: the error is at "orders".
	if !strings.HasPrefix(errText, "42601 syntax error at or near \"orders\"") || len(lines) < 3 || lines[len(lines)-2] != "LINE 2: FRM orders" ||
		lines[len(lines)-1] != strings.Repeat(" ", len("LINE 2: FRM "))+"^" {
		t.Errorf("error box:\n%s", errText)
	}
	b.do("a push query", chromedp.SetValue(chromedp.CSS("#sql-input"), "SELECT id, user_id, amount FROM orders WHERE amount > 5"),
		chromedp.SetValue(chromedp.CSS("#sql-max-rows"), "0"), chromedp.Click(chromedp.CSS("#sql-run")))
	b.waitJS(30*time.Second, `document.querySelectorAll('.result-table tbody tr').length >= 5`, `document.querySelector('#sql-output').innerText`)
	b.do("stop", chromedp.Click(chromedp.CSS("#sql-stop")))
	b.waitJS(10*time.Second, `document.querySelector('#sql-state').textContent === 'stopped' && !document.querySelector('#sql-run').disabled`,
		`document.querySelector('#sql-state').textContent`)
	var meta string
	b.eval(`document.querySelector('.result .meta').textContent`, &meta)
	if !strings.HasPrefix(meta, "stopped after ") {
		t.Errorf("push result after Stop says %q", meta)
	}
	var n1, n2 int
	b.eval(`document.querySelectorAll('.result-table tbody tr').length`, &n1)
	time.Sleep(1 * time.Second)
	b.eval(`document.querySelectorAll('.result-table tbody tr').length`, &n2)
	if n1 != n2 {
		t.Errorf("rows still arrive after Stop: %d then %d", n1, n2)
	}
	var amounts []float64
	b.eval(`Array.from(document.querySelectorAll('.result-table tbody tr')).map(r => Number(r.cells[2].textContent))`, &amounts)
	for _, a := range amounts {
		if a <= 5 {
			t.Errorf("push query row with amount %v (WHERE amount > 5)", a)
		}
	}
	b.screenshot("sql")
	b.checkConsole()
}
