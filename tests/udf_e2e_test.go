package tests

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"
)

// A JavaScript aggregate in a tumbling and in a session window, over broker topics, with
// the server killed with SIGKILL three times while it processes: each result topic holds
// exactly the result Go computes from the events (its state went through checkpoints as
// JSON and came back per split; session merges went through merge()).

const udafDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4, idle_timeout = '1s');
CREATE AGGREGATE cents_sum(v DOUBLE, w INT) RETURNS DOUBLE LANGUAGE javascript AS $$ {
  create() { return {c: 0}; },
  add(s, v, w) { s.c += Math.round(v * 100) * w; return s; },
  merge(a, b) { return {c: a.c + b.c}; },
  result(s) { return s.c / 100; }
} $$;
CREATE STREAM result_t WITH (queues = 4) AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, cents_sum(amount, qty) AS total
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end;
CREATE STREAM result_s WITH (queues = 4) AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, cents_sum(amount, qty) AS total
  FROM SESSION(orders, ts, INTERVAL '4' SECOND) GROUP BY user_id, window_start, window_end;`

const sessionGapMs = 4000

// udafBatch computes both results from the on-time events.
func udafBatch(evs []event) (tumble, session []string, lastEnd int64) {
	type k struct {
		user string
		ws   int64
	}
	type agg struct{ n, cents int64 }
	tm := map[k]*agg{}
	byUser := map[string][]event{}
	for _, e := range evs {
		if e.Late {
			continue
		}
		ws := e.TsMs - e.TsMs%10000
		a := tm[k{e.UserID, ws}]
		if a == nil {
			a = &agg{}
			tm[k{e.UserID, ws}] = a
		}
		a.n++
		a.cents += int64(math.Round(e.Amount*100)) * int64(e.Qty)
		lastEnd = max(lastEnd, ws+10000)
		byUser[e.UserID] = append(byUser[e.UserID], e)
	}
	for key, a := range tm {
		tumble = append(tumble, udafLine(key.user, key.ws, key.ws+10000, a.n, a.cents))
	}
	for user, es := range byUser {
		sort.Slice(es, func(i, j int) bool { return es[i].TsMs < es[j].TsMs })
		start, end, n, cents := int64(0), int64(-1), int64(0), int64(0)
		for _, e := range es {
			if n > 0 && e.TsMs > end { // a row at a session's end touches it: same session
				session = append(session, udafLine(user, start, end, n, cents))
				n = 0
			}
			if n == 0 {
				start, cents = e.TsMs, 0
			}
			n++
			cents += int64(math.Round(e.Amount*100)) * int64(e.Qty)
			end = max(end, e.TsMs+sessionGapMs)
			lastEnd = max(lastEnd, end)
		}
		session = append(session, udafLine(user, start, end, n, cents))
	}
	return tumble, session, lastEnd
}

func udafLine(user string, ws, we, n, cents int64) string {
	return fmt.Sprintf("%s %d %d n=%d total=%.2f", user, ws, we, n, float64(cents)/100)
}

func consumedUDAF(t *testing.T, ns, topic string) []string {
	out, errOut, err := runRsql(t, "", "consume", topic, "--from-beginning", "--idle-exit", "3s", "--namesrv-addr", ns)
	if err != nil {
		t.Fatalf("consume %s: %v\n%s", topic, err, errOut)
	}
	var got []string
	for _, l := range lines(out) {
		var r struct {
			UserID      string    `json:"user_id"`
			WindowStart time.Time `json:"window_start"`
			WindowEnd   time.Time `json:"window_end"`
			N           int64     `json:"n"`
			Total       float64   `json:"total"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s message is not a row: %v: %s", topic, err, l)
		}
		if r.UserID[0] == '~' {
			continue // the records that close the windows
		}
		got = append(got, udafLine(r.UserID, r.WindowStart.UnixMilli(), r.WindowEnd.UnixMilli(), r.N, int64(math.Round(r.Total*100))))
	}
	return got
}

func TestUDAFSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server through three kills")
	}
	// In event-time order, without the late copies: between the chunks every queue goes
	// idle and the watermark moves to the largest event time read (docs/sql.md,
	// idle_timeout), which an out-of-order record of the next chunk would then be behind.
	evs := onTimeEvents(genEvents(47)[:30_000])
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].TsMs < evs[j].TsMs })
	wantT, wantS, lastEnd := udafBatch(evs)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("kill timing seed %d", seed)
	s := newJobsServer(t)
	s.sql(udafDDL)
	third := len(evs) / 3
	for i, c := range [][]event{evs[:third], evs[third : 2*third], evs[2*third:]} {
		produceEvents(t, s.ns, c)
		d := time.Duration(r.Intn(2500)) * time.Millisecond
		time.Sleep(d)
		t.Logf("kill -9 #%d %v after producing chunk %d", i+1, d, i+1)
		s.p.Kill()
		s.start()
	}
	// A session closes once the watermark is past its end (docs/sql.md, "Windows"): the
	// closing records come 1 ms after the last session's end, and the job's watermark, held
	// back 1 ms by its session aggregation, then reaches that end.
	closeWindows(t, s.ns, lastEnd+sessionGapMs+1)
	waitWatermark(t, s, lastEnd+sessionGapMs)
	compareMultisets(t, "tumbling window result after 3 kills", wantT, consumedUDAF(t, s.ns, "result_t"))
	compareMultisets(t, "session window result after 3 kills", wantS, consumedUDAF(t, s.ns, "result_s"))
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}
