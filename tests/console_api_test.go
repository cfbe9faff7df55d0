package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// consoleServer is an `rsql server` with a windowed aggregation running over a stream that
// a feeder keeps writing to.
type consoleServer struct {
	srv         *proc
	pgAddr      string
	httpAddr    string
	namesrvAddr string
	conn        *pgx.Conn

	mu     sync.Mutex
	sent   int // records inserted so far
	passed int // of which amount > 5 (the job's filter)
	stop   chan struct{}
	done   chan struct{}
}

const consoleJobSQL = "CREATE STREAM totals AS SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total " +
	"FROM TUMBLE(orders, ts, INTERVAL '2' SECOND) WHERE amount > 5 GROUP BY user_id, window_start, window_end"

// startConsoleServer starts the server, declares orders (two queues, event time ts) and
// starts job-1 (consoleJobSQL); feed starts writing to orders.
func startConsoleServer(t *testing.T) *consoleServer {
	t.Helper()
	cs := &consoleServer{pgAddr: freePort(t), httpAddr: freePort(t), namesrvAddr: freePort(t)}
	cs.srv = startProc(t, buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", cs.pgAddr,
		"--namesrv-addr", cs.namesrvAddr, "--broker-addr", freePort(t), "--http-addr", cs.httpAddr)
	waitListening(t, cs.srv, cs.pgAddr)
	waitListening(t, cs.srv, cs.httpAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+cs.pgAddr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	cs.conn = conn
	for _, s := range []string{
		"CREATE STREAM orders (id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (queues = 2)",
		consoleJobSQL,
	} {
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return cs
}

// feed inserts records every 100 ms, event time now, until stopFeed (at most 3000
// rounds): 5 to 14 a round, rising and falling, so that rates change.
func (cs *consoleServer) feed(t *testing.T) {
	cs.stop, cs.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cs.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for round := 0; round < 3000; round++ {
			select {
			case <-cs.stop:
				return
			case <-tick.C:
			}
			cs.mu.Lock()
			var vals []string
			base := cs.sent
			passed := 0
			now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
			n := 5 + (round/10)%10
			if (round/100)%2 == 1 {
				n = 14 - (round/10)%10
			}
			for i := 0; i < n; i++ {
				id := base + i + 1
				amount := float64(id%13) + 0.5
				if amount > 5 {
					passed++
				}
				vals = append(vals, fmt.Sprintf("(%d, 'u%d', %g, '%s')", id, id%4, amount, now))
			}
			cs.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cs.conn.Exec(ctx, "INSERT INTO orders VALUES "+strings.Join(vals, ", "), pgx.QueryExecModeSimpleProtocol)
			cancel()
			if err != nil {
				t.Errorf("insert: %v", err)
				return
			}
			cs.mu.Lock()
			cs.sent += n
			cs.passed += passed
			cs.mu.Unlock()
		}
	}()
	t.Cleanup(cs.stopFeed)
}

// stopFeed stops the feeder (counts says what it sent).
func (cs *consoleServer) stopFeed() {
	if cs.stop == nil {
		return
	}
	select {
	case <-cs.stop:
	default:
		close(cs.stop)
	}
	<-cs.done
}

func (cs *consoleServer) counts() (sent, passed int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.sent, cs.passed
}

// apiGet fetches path from the console's API and decodes its JSON into out; it returns
// the status.
func (cs *consoleServer) apiGet(t *testing.T, path string, out any) int {
	t.Helper()
	resp, err := http.Get("http://" + cs.httpAddr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode
}

func (cs *consoleServer) apiPost(t *testing.T, path string, out any) int {
	t.Helper()
	resp, err := http.Post("http://"+cs.httpAddr+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode
}

// waitUntil polls cond every 200 ms for up to d; it fails the test with what() when cond
// never holds.
func waitUntil(t *testing.T, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The parts of the API's JSON the tests read.
type apiJob struct {
	ID         string   `json:"id"`
	State      string   `json:"state"`
	Running    bool     `json:"running"`
	Sources    []string `json:"sources"`
	Sink       string   `json:"sink"`
	InputRate  *float64 `json:"input_rate"`
	OutputRate *float64 `json:"output_rate"`
	RecordsIn  int64    `json:"records_in"`
	RecordsOut int64    `json:"records_out"`
	Lag        *int64   `json:"lag"`
	Watermark  *string  `json:"watermark"`
	Checkpoint *struct {
		Epoch      int64   `json:"epoch"`
		DurationMs float64 `json:"duration_ms"`
		Count      int64   `json:"count"`
	} `json:"checkpoint"`
	Instances []struct {
		Name string `json:"name"`
	} `json:"instances"`
	Detail *struct {
		Splits []struct {
			Stage  int    `json:"stage"`
			Stream string `json:"stream"`
			Split  string `json:"split"`
			Offset int64  `json:"offset"`
			Lag    *int64 `json:"lag"`
		} `json:"splits"`
		Stages []struct {
			ID        int      `json:"id"`
			Watermark *string  `json:"watermark"`
			InputRate *float64 `json:"input_rate"`
		} `json:"stages"`
		Nodes map[string]struct {
			Rows int64    `json:"rows"`
			Rate *float64 `json:"rate"`
		} `json:"nodes"`
	} `json:"detail"`
	History *struct {
		IntervalMs int64 `json:"interval_ms"`
		WindowMs   int64 `json:"window_ms"`
		Points     []struct {
			T            int64    `json:"t"`
			InputRate    *float64 `json:"input_rate"`
			CheckpointMs *float64 `json:"checkpoint_ms"`
		} `json:"points"`
	} `json:"history"`
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// The console's API against a server running a shuffled windowed aggregation: the job's
// counters, rates and history, its plan graph with a row count per edge that adds up
// exactly, pause and resume, streams, topics with consumer groups, the last messages of a
// queue decoded with the stream's format, and SQL.
func TestConsoleAPI(t *testing.T) {
	cs := startConsoleServer(t)
	cs.feed(t)

	var jobs struct{ Jobs []apiJob }
	waitUntil(t, 40*time.Second, func() string { return fmt.Sprintf("jobs %+v", jobs) }, func() bool {
		if cs.apiGet(t, "/api/v1/jobs", &jobs) != 200 || len(jobs.Jobs) != 1 {
			return false
		}
		j := jobs.Jobs[0]
		return j.InputRate != nil && *j.InputRate > 0 && j.RecordsIn > 0 && j.Checkpoint != nil && j.Checkpoint.Count > 0
	})
	j := jobs.Jobs[0]
	if j.ID != "job-1" || j.State != "RUNNING" || !j.Running || !slices.Equal(j.Sources, []string{"orders"}) || j.Sink != "totals" ||
		j.Lag == nil || j.Watermark == nil || len(j.Instances) != 1 {
		t.Errorf("job %+v", j)
	}

	// The plan graph: nodes of the running plan, edges along it.
	var plan struct {
		Job   string `json:"job"`
		Graph struct {
			Stages []struct {
				ID    int      `json:"id"`
				Nodes []string `json:"nodes"`
			} `json:"stages"`
			Nodes []struct {
				ID    string `json:"id"`
				Kind  string `json:"kind"`
				Label string `json:"label"`
			} `json:"nodes"`
			Edges []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"edges"`
		} `json:"graph"`
		Explain string `json:"explain"`
	}
	if st := cs.apiGet(t, "/api/v1/jobs/job-1/plan", &plan); st != 200 {
		t.Fatalf("plan: %d", st)
	}
	var kinds []string
	for _, n := range plan.Graph.Nodes {
		kinds = append(kinds, n.ID+"="+n.Kind)
	}
	wantKinds := []string{"s0.in0=source", "s0.op0=filter", "s0.out=exchange", "s1.in0=edge", "s1.op0=aggregate", "s1.op1=project", "s1.out=sink"}
	if !slices.Equal(kinds, wantKinds) || len(plan.Graph.Edges) != 6 || !strings.Contains(plan.Explain, "Exchange topic=job-1-0-shuffle") {
		t.Errorf("plan nodes %v, %d edges, explain:\n%s", kinds, len(plan.Graph.Edges), plan.Explain)
	}

	var detail apiJob
	waitUntil(t, 30*time.Second, func() string { return fmt.Sprintf("detail %+v", detail.Detail) }, func() bool {
		cs.apiGet(t, "/api/v1/jobs/job-1", &detail)
		n := detail.Detail.Nodes["s0.in0"]
		return n.Rate != nil && *n.Rate > 0 && len(detail.History.Points) >= 2
	})
	for _, n := range plan.Graph.Nodes {
		if _, ok := detail.Detail.Nodes[n.ID]; !ok {
			t.Errorf("no counters for plan node %s: %v", n.ID, detail.Detail.Nodes)
		}
	}
	if len(detail.Detail.Stages) != 2 || detail.Detail.Stages[0].InputRate == nil || detail.Detail.Stages[0].Watermark == nil {
		t.Errorf("stages %+v", detail.Detail.Stages)
	}
	sources := 0
	for _, sp := range detail.Detail.Splits {
		if sp.Stage == 0 && sp.Stream == "orders" {
			sources++
		}
	}
	if sources != 2 {
		t.Errorf("splits %+v: want the two queues of orders in stage 0", detail.Detail.Splits)
	}
	if h := detail.History; h.IntervalMs != 2000 || h.WindowMs != 15*60*1000 {
		t.Errorf("history interval %d window %d", h.IntervalMs, h.WindowMs)
	}
	// ?since returns only later points.
	last := detail.History.Points[len(detail.History.Points)-1].T
	var later apiJob
	cs.apiGet(t, fmt.Sprintf("/api/v1/jobs/job-1?since=%d", last), &later)
	for _, p := range later.History.Points {
		if p.T <= last {
			t.Errorf("since=%d gave point at %d", last, p.T)
		}
	}

	// When the input stops, the counts of the edges settle on exactly what was sent: every
	// record enters, the filter passes those with amount > 5, the exchange delivers them
	// all to stage 1.
	cs.stopFeed()
	sent, passed := cs.counts()
	waitUntil(t, 30*time.Second, func() string {
		return fmt.Sprintf("sent %d passed %d; nodes %+v", sent, passed, detail.Detail.Nodes)
	}, func() bool {
		cs.apiGet(t, "/api/v1/jobs/job-1", &detail)
		n := detail.Detail.Nodes
		return n["s0.in0"].Rows == int64(sent) && n["s0.op0"].Rows == int64(passed) && n["s0.out"].Rows == int64(passed) &&
			n["s1.in0"].Rows == int64(passed) && detail.RecordsIn == int64(sent)
	})
	// Stage 1's operators pass on what the aggregation emits (windows may still be firing:
	// a sample can fall between two operators).
	waitUntil(t, 30*time.Second, func() string { return fmt.Sprintf("stage 1 counts %+v", detail.Detail.Nodes) }, func() bool {
		cs.apiGet(t, "/api/v1/jobs/job-1", &detail)
		n := detail.Detail.Nodes
		return n["s1.op0"].Rows > 0 && n["s1.out"].Rows == n["s1.op1"].Rows && n["s1.op1"].Rows == n["s1.op0"].Rows
	})

	t.Run("pause and resume", func(t *testing.T) {
		var got apiJob
		if st := cs.apiPost(t, "/api/v1/jobs/job-1/pause", &got); st != 200 || got.State != "PAUSED" || got.Running {
			t.Fatalf("pause: %d %+v", st, got)
		}
		var e apiError
		if st := cs.apiPost(t, "/api/v1/jobs/job-1/pause", &e); st != 409 || e.Error.Code != "22023" || !strings.Contains(e.Error.Message, "not RUNNING") {
			t.Errorf("pause of a paused job: %d %+v", st, e)
		}
		var plan2 struct {
			Graph struct {
				Nodes []any `json:"nodes"`
			} `json:"graph"`
		}
		if st := cs.apiGet(t, "/api/v1/jobs/job-1/plan", &plan2); st != 200 || len(plan2.Graph.Nodes) != 7 {
			t.Errorf("plan of the paused job: %d, %d nodes", st, len(plan2.Graph.Nodes))
		}
		if st := cs.apiPost(t, "/api/v1/jobs/job-1/resume", &got); st != 200 || got.State != "RUNNING" || !got.Running {
			t.Fatalf("resume: %d %+v", st, got)
		}
		if st := cs.apiPost(t, "/api/v1/jobs/job-9/pause", &e); st != 404 || e.Error.Code != "42P01" {
			t.Errorf("pause of an unknown job: %d %+v", st, e)
		}
		if st := cs.apiPost(t, "/api/v1/jobs/job-1/restart", &e); st != 404 || !strings.Contains(e.Error.Message, "pause, resume or terminate") {
			t.Errorf("unknown action: %d %+v", st, e)
		}
		// A page of another site cannot drive the API.
		req, _ := http.NewRequest("POST", "http://"+cs.httpAddr+"/api/v1/jobs/job-1/pause", nil)
		req.Header.Set("Origin", "http://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("cross-origin pause: %d", resp.StatusCode)
		}
		var jobs struct{ Jobs []apiJob }
		cs.apiGet(t, "/api/v1/jobs", &jobs)
		if jobs.Jobs[0].State != "RUNNING" {
			t.Errorf("state after the refused pause: %s", jobs.Jobs[0].State)
		}
	})

	t.Run("bad records", func(t *testing.T) {
		// A record whose id is not a number: counted as bad, its reason on the job's page.
		body := `{"id": "seven", "user_id": "u1", "amount": 9.5, "ts": "` + time.Now().UTC().Format(time.RFC3339) + `"}` + "\n"
		if out, errOut, err := runRsql(t, body, "produce", "orders", "--namesrv-addr", cs.namesrvAddr); err != nil {
			t.Fatalf("rsql produce: %v\n%s%s", err, out, errOut)
		}
		var d struct {
			Bad    int64 `json:"bad"`
			Detail struct {
				BadErrors []string `json:"bad_errors"`
			} `json:"detail"`
		}
		waitUntil(t, 30*time.Second, func() string { return fmt.Sprintf("%+v", d) }, func() bool {
			cs.apiGet(t, "/api/v1/jobs/job-1", &d)
			return d.Bad == 1 && len(d.Detail.BadErrors) == 1
		})
		if e := d.Detail.BadErrors[0]; !strings.Contains(e, "orders") || !strings.Contains(e, "id") {
			t.Errorf("bad record error %q names neither the stream nor the field", e)
		}
		var e apiError
		if st := cs.apiGet(t, "/api/v1/jobs/job-7", &e); st != 404 || e.Error.Code != "42P01" {
			t.Errorf("unknown job: %d %+v", st, e)
		}
	})

	t.Run("streams", func(t *testing.T) {
		var out struct {
			Streams []struct {
				Name      string            `json:"name"`
				Columns   []map[string]any  `json:"columns"`
				EventTime string            `json:"event_time"`
				Options   map[string]string `json:"options"`
				Topic     string            `json:"topic"`
				Job       string            `json:"job"`
				Readers   []string          `json:"readers"`
			} `json:"streams"`
		}
		cs.apiGet(t, "/api/v1/streams", &out)
		if len(out.Streams) != 2 {
			t.Fatalf("streams %+v", out)
		}
		o, tot := out.Streams[0], out.Streams[1]
		if o.Name != "orders" || len(o.Columns) != 4 || o.Columns[3]["type"] != "TIMESTAMP" || o.EventTime != "ts" ||
			o.Options["queues"] != "2" || o.Topic != "orders" || !slices.Equal(o.Readers, []string{"job-1"}) {
			t.Errorf("orders %+v", o)
		}
		if tot.Name != "totals" || tot.Job != "job-1" || len(tot.Readers) != 0 {
			t.Errorf("totals %+v", tot)
		}
		var e apiError
		if st := cs.apiGet(t, "/api/v1/streams/nope", &e); st != 404 {
			t.Errorf("unknown stream: %d", st)
		}
	})

	t.Run("topics and messages", func(t *testing.T) {
		type topic struct {
			Name   string `json:"name"`
			Queues []struct {
				Queue     int   `json:"queue"`
				MinOffset int64 `json:"min_offset"`
				MaxOffset int64 `json:"max_offset"`
			} `json:"queues"`
			Messages int64    `json:"messages"`
			Streams  []string `json:"streams"`
			Groups   []struct {
				Group  string `json:"group"`
				Lag    int64  `json:"lag"`
				Queues []struct {
					Queue  int   `json:"queue"`
					Offset int64 `json:"offset"`
				} `json:"queues"`
			} `json:"groups"`
		}
		var orders topic
		waitUntil(t, 20*time.Second, func() string { return fmt.Sprintf("orders %+v", orders) }, func() bool {
			cs.apiGet(t, "/api/v1/topics/orders", &orders)
			return len(orders.Groups) == 1 && orders.Groups[0].Lag == 0
		})
		if orders.Messages != int64(sent)+1 /* and the bad record */ || len(orders.Queues) != 2 || !slices.Equal(orders.Streams, []string{"orders"}) ||
			orders.Groups[0].Group != "rsql-job-1" {
			t.Errorf("orders %+v (sent %d)", orders, sent)
		}
		var all struct{ Topics []topic }
		cs.apiGet(t, "/api/v1/topics", &all)
		var names []string
		for _, tp := range all.Topics {
			names = append(names, tp.Name)
		}
		if !slices.Contains(names, "orders") || !slices.Contains(names, "totals") || !slices.Contains(names, "job-1-0-shuffle") {
			t.Errorf("topics %v", names)
		}

		q := orders.Queues[0]
		var msgs struct {
			Stream   string `json:"stream"`
			Format   string `json:"format"`
			Columns  []map[string]string
			Messages []struct {
				Offset      int64  `json:"offset"`
				Body        string `json:"body"`
				Values      []any  `json:"values"`
				DecodeError string `json:"decode_error"`
			} `json:"messages"`
		}
		if st := cs.apiGet(t, "/api/v1/topics/orders/queues/0/messages?last=5", &msgs); st != 200 {
			t.Fatalf("messages: %d", st)
		}
		if msgs.Stream != "orders" || msgs.Format != "json" || len(msgs.Columns) != 4 || len(msgs.Messages) != int(min(5, q.MaxOffset-q.MinOffset)) {
			t.Fatalf("messages %+v (queue %+v)", msgs, q)
		}
		for i, m := range msgs.Messages {
			if m.Offset != q.MaxOffset-int64(len(msgs.Messages)-i) {
				t.Errorf("message %d at offset %d, queue ends at %d", i, m.Offset, q.MaxOffset)
			}
			if m.DecodeError != "" {
				// The bad record, if it went to this queue: shown with why it does not decode.
				if !strings.Contains(m.Body, `"seven"`) || !strings.Contains(m.DecodeError, "id") || m.Values != nil {
					t.Errorf("message %d: %+v", m.Offset, m)
				}
				continue
			}
			// The decoded values are the body's, in the stream's column order.
			var body map[string]any
			if err := json.Unmarshal([]byte(m.Body), &body); err != nil || len(m.Values) != 4 {
				t.Fatalf("message %+v: %v", m, err)
			}
			id := m.Values[0].(float64)
			if body["id"] != id || body["user_id"] != m.Values[1] || body["amount"] != m.Values[2] ||
				m.Values[1] != fmt.Sprintf("u%d", int(id)%4) || m.Values[2] != float64(int(id)%13)+0.5 {
				t.Errorf("message %d: values %v, body %s", m.Offset, m.Values, m.Body)
			}
			if ts, _ := m.Values[3].(string); !strings.HasPrefix(ts, time.Now().UTC().Format("2006-")) {
				t.Errorf("ts decoded as %v", m.Values[3])
			}
		}
		var e apiError
		if st := cs.apiGet(t, "/api/v1/topics/orders/queues/0/messages?last=0", &e); st != 400 || !strings.Contains(e.Error.Message, "last") {
			t.Errorf("last=0: %d %+v", st, e)
		}
		if st := cs.apiGet(t, "/api/v1/topics/orders/queues/2/messages", &e); st != 404 || !strings.Contains(e.Error.Message, "queues 0 to 1") {
			t.Errorf("queue 2 of 2: %d %+v", st, e)
		}
		if st := cs.apiGet(t, "/api/v1/topics/nope", &e); st != 404 {
			t.Errorf("unknown topic: %d", st)
		}
	})

	t.Run("sql", func(t *testing.T) {
		// A pull result: SHOW STREAMS.
		evs, status := postSQL(t, cs.httpAddr, `{"sql": "SHOW STREAMS"}`, nil)
		if status != 200 || len(evs) != 4 || evs[0]["type"] != "columns" || evs[1]["type"] != "row" || evs[3]["type"] != "complete" || evs[3]["tag"] != "SHOW" {
			t.Fatalf("SHOW STREAMS: %d %v", status, evs)
		}
		if v := evs[1]["values"].([]any); v[0] != "orders" || v[1] != "broker" {
			t.Errorf("first row %v", v)
		}
		// A syntax error: SQLSTATE and the 1-based position of the bad token.
		evs, status = postSQL(t, cs.httpAddr, `{"sql": "SHOW STREAMS;\nSELEC 1"}`, nil)
		last := evs[len(evs)-1]
		if status != 400 || last["type"] != "error" || last["code"] != "42601" || last["position"] != float64(15) || last["line"] != float64(2) {
			t.Errorf("syntax error: %d %v", status, evs)
		}
		// A push query: rows as they arrive, stopped after max_rows.
		cs.feed(t)
		evs, status = postSQL(t, cs.httpAddr, `{"sql": "SELECT id, amount FROM orders WHERE amount > 5", "max_rows": 3}`, nil)
		if status != 200 || len(evs) != 5 || evs[0]["push"] != true || evs[4]["type"] != "complete" || evs[4]["stopped"] != true || evs[4]["tag"] != "SELECT 3" {
			t.Errorf("push query: %d %v", status, evs)
		}
		for _, ev := range evs[1:4] {
			if v := ev["values"].([]any); v[1].(float64) <= 5 {
				t.Errorf("row %v does not pass the WHERE", v)
			}
		}
		// Result columns are named as PostgreSQL names them.
		evs, status = postSQL(t, cs.httpAddr, `{"sql": "SELECT orders.id, amount * 2, upper('a'), CAST(1 AS BIGINT) FROM orders", "max_rows": 1}`, nil)
		var names []string
		if status == 200 && len(evs) > 0 {
			cols, _ := evs[0]["columns"].([]any)
			for _, c := range cols {
				names = append(names, fmt.Sprint(c.(map[string]any)["name"]))
			}
		}
		if strings.Join(names, ",") != "id,?column?,upper,int8" {
			t.Errorf("result column names %v: %d %v", names, status, evs)
		}
		// A push query the client stops: the answer ends when the client goes away.
		ctx, cancel := context.WithCancel(context.Background())
		got := 0
		_, _ = postSQL(t, cs.httpAddr, `{"sql": "SELECT id FROM orders"}`, func(ev map[string]any) bool {
			if ev["type"] == "row" {
				got++
			}
			if got == 2 {
				cancel()
				return false
			}
			return true
		}, ctx)
		if got != 2 {
			t.Errorf("stoppable push query gave %d rows", got)
		}
		// Statements that make no rows, with the notice of the job they start.
		evs, _ = postSQL(t, cs.httpAddr, `{"sql": "CREATE STREAM big AS SELECT id FROM orders WHERE amount > 10"}`, nil)
		if len(evs) != 2 || evs[0]["type"] != "notice" || !strings.Contains(evs[0]["message"].(string), "job-2") || evs[1]["tag"] != "CREATE STREAM" {
			t.Errorf("CREATE STREAM AS: %v", evs)
		}
		// The job it started, terminated: it cannot be resumed.
		var job2 apiJob
		if st := cs.apiPost(t, "/api/v1/jobs/job-2/terminate", &job2); st != 200 || job2.State != "TERMINATED" || job2.Running {
			t.Errorf("terminate: %d %+v", st, job2)
		}
		var e apiError
		if st := cs.apiPost(t, "/api/v1/jobs/job-2/resume", &e); st != 409 || !strings.Contains(e.Error.Message, "TERMINATED") {
			t.Errorf("resume of a terminated job: %d %+v", st, e)
		}
		// Not JSON: refused.
		resp, err := http.Post("http://"+cs.httpAddr+"/api/v1/sql", "text/plain", strings.NewReader("SHOW JOBS"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 415 {
			t.Errorf("text/plain body: %d", resp.StatusCode)
		}
	})

	t.Run("pages", func(t *testing.T) {
		for path, want := range map[string]string{"/": "/assets/console.js", "/assets/console.js": "function drawPlan", "/assets/console.css": "svg.plan"} {
			resp, err := http.Get("http://" + cs.httpAddr + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), want) || resp.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("GET %s: %d, %d bytes, CSP %q", path, resp.StatusCode, len(b), resp.Header.Get("Content-Security-Policy"))
			}
		}
		var e apiError
		if st := cs.apiGet(t, "/api/v1/nothing", &e); st != 404 || !strings.Contains(e.Error.Message, "docs/operations.md") {
			t.Errorf("unknown endpoint: %d %+v", st, e)
		}
		// /metrics and /healthz are still there.
		resp, err := http.Get("http://" + cs.httpAddr + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("/healthz: %v", err)
		}
		resp.Body.Close()
	})
}

// postSQL posts body to /api/v1/sql and reads the JSON lines of the answer; each is
// passed to onEvent when given, which may stop reading by returning false. An optional
// context cancels the request.
func postSQL(t *testing.T, httpAddr, body string, onEvent func(map[string]any) bool, ctxs ...context.Context) ([]map[string]any, int) {
	t.Helper()
	ctx := context.Background()
	if len(ctxs) > 0 {
		ctx = ctxs[0]
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+httpAddr+"/api/v1/sql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q", ct)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
		if onEvent != nil && !onEvent(ev) {
			break
		}
	}
	return evs, resp.StatusCode
}
