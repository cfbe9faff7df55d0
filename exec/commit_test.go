package exec

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rsql/broker"
	"rsql/state"
)

// While a checkpoint's commit is held up, the stage that commits goes on processing the rows
// after the barrier, but publishes nothing: the outbox of that checkpoint reaches the sink
// topic only after the commit returned. A second checkpoint meanwhile waits: commits of a
// stage never overlap and land in epoch order. Finally the output holds every window once.
func TestCommitOffStageGoroutine(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 4000)
	// The topic is a replay (its event times are far from now): once every queue is idle
	// the watermark goes to the largest event time and no further, so the windows that
	// end after it stay open.
	groups := closedBy(tumbleGroups(all), maxTs(all))
	want := expectRows(groups, true, countSumText)

	store := state.NewMemory()
	env := brokerEnv(b, store, true)
	env.CheckpointInterval = time.Hour // checkpoints on request only, output exactly-once
	var (
		mu       sync.Mutex
		inFlight int
		problems []string
		epochs   []int64
		outAt    []int // rows in the sink topic when each commit of the output stage started
	)
	entered := make(chan struct{})
	gate := make(chan struct{})
	first := true
	env.Commit = func(cp *CheckpointInfo) error {
		downstream := len(cp.Offsets) > 0 && cp.Offsets[0].Stream == "bj-0-shuffle"
		if downstream {
			mu.Lock()
			inFlight++
			if inFlight > 1 {
				problems = append(problems, fmt.Sprintf("commit of epoch %d overlaps another", cp.Epoch))
			}
			epochs = append(epochs, cp.Epoch)
			outAt = append(outAt, len(topicBodies(t, b, "out")))
			block := first
			first = false
			mu.Unlock()
			if block {
				close(entered)
				<-gate
			}
		}
		err := store.Write(cp.State)
		if downstream {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}
		return err
	}
	j, err := Start(context.Background(), "bj", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release() // before Stop, which waits for the commit in flight
	ckpt := func() chan error {
		done := make(chan error, 1)
		go func() { _, err := j.Checkpoint(context.Background()); done <- err }()
		return done
	}
	// Let some windows fire first, so that the held checkpoint covers output: the output
	// stage's watermark past the first window's end (it follows the shuffle topic's
	// watermark messages, which may come a tick after the rows).
	firstEnd := int64(math.MaxInt64)
	for k := range groups {
		firstEnd = min(firstEnd, k.end)
	}
	deadline := time.Now().Add(60 * time.Second)
	for j.Stats().RecordsIn < int64(len(all)/3) || j.Stats().Watermark < firstEnd {
		if time.Now().After(deadline) {
			t.Fatalf("job read %d of %d events", j.Stats().RecordsIn, len(all))
		}
		time.Sleep(5 * time.Millisecond)
	}
	first1 := ckpt()
	select {
	case <-entered:
	case err := <-first1:
		t.Fatalf("checkpoint returned (%v) without committing the output stage", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no commit of the output stage")
	}
	// With the commit held, the output stage must still read the shuffle topic to its end.
	for {
		var read, end int64
		for _, sp := range j.Stats().Splits {
			if sp.Stream == "bj-0-shuffle" {
				read += sp.Offset
			}
		}
		ti, _ := b.Topic("bj-0-shuffle")
		for q := 0; q < ti.Queues; q++ {
			m, err := b.MaxOffset("bj-0-shuffle", q)
			if err != nil {
				t.Fatal(err)
			}
			end += m
		}
		if j.Stats().RecordsIn == int64(len(all)) && read == end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("while a commit was in flight the output stage read %d of %d shuffle messages", read, end)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(topicBodies(t, b, "out")); n != 0 {
		t.Fatalf("%d rows published before their checkpoint committed", n)
	}
	second := ckpt()
	release()
	for _, ch := range []chan error{first1, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(topicBodies(t, b, "out")); n == 0 {
		t.Fatal("nothing published after the checkpoint committed")
	}
	// The last windows fire by idle timeout; checkpoints publish them.
	for len(topicBodies(t, b, "out")) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("sink topic has %d rows, want %d", len(topicBodies(t, b, "out")), len(want))
		}
		if err := <-ckpt(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := topicBodies(t, b, "out")
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("commits of the output stage in epoch order %v", epochs)
		}
	}
	if len(outAt) < 2 || outAt[0] != 0 {
		t.Fatalf("rows in the sink topic at each commit: %v", outAt)
	}
}

// With a minimum interval the checkpoint interval adapts to what commits cost: a job whose
// commits are cheap checkpoints again and again although its (maximum) interval is an hour.
func TestAdaptiveCheckpointInterval(t *testing.T) {
	var commits atomic.Int64
	j := trickledJob(t, "aj", func(env *Env) {
		env.CheckpointInterval, env.MinCheckpointInterval = time.Hour, time.Millisecond
		env.Commit = func(cp *CheckpointInfo) error {
			commits.Add(1)
			time.Sleep(2 * time.Millisecond) // the cost the interval adapts to
			return env.Store.Write(cp.State)
		}
	})
	waitFor(t, "ten epochs", func() bool { return j.Stats().Epoch >= 10 })
	if commits.Load() < 10 {
		t.Fatalf("%d commits for epoch %d", commits.Load(), j.Stats().Epoch)
	}
}

// Env.Runners makes each of n processes running units of a job wait n times as long after
// a commit of the same cost: a job whose commits are cheap checkpoints again and again while
// it is the only runner, and stops once a hundred thousand share its commits (the wait,
// ten times its commits' cost that many times, is beyond the 300 ms checkpointsStop looks
// at, while the floor, a hundred thousand nanoseconds, is not).
func TestRunnersShareCommitCost(t *testing.T) {
	var runners, looks atomic.Int64
	runners.Store(1)
	j := trickledJob(t, "sj", func(env *Env) {
		env.CheckpointInterval, env.MinCheckpointInterval = 2*time.Hour, time.Nanosecond
		env.Runners = func() int {
			looks.Add(1)
			return int(runners.Load())
		}
	})
	checkpointsStop(t, j, &looks, "a hundred thousand runners", func() { runners.Store(1e5) })
}

// However many processes run units of a job, their checkpoints together commit it as often
// as one process would at its least interval (ten times a second with the cluster's 100
// ms), and none waits beyond the job's interval.
func TestCheckpointFloorsWithRunners(t *testing.T) {
	env := Env{CheckpointInterval: time.Second, MinCheckpointInterval: 100 * time.Millisecond, LightCheckpointInterval: 2 * time.Millisecond}
	for n := 1; n <= 20; n++ {
		least, light := env.checkpointFloors(n)
		if least > env.CheckpointInterval || least < env.MinCheckpointInterval {
			t.Fatalf("%d runners: floor %v outside [%v, %v]", n, least, env.MinCheckpointInterval, env.CheckpointInterval)
		}
		if perSecond := float64(n) * float64(time.Second) / float64(least); least < env.CheckpointInterval && perSecond > 10+1e-9 {
			t.Fatalf("%d runners at %v each: %.1f commits a second", n, least, perSecond)
		}
		if n == 1 && least != env.MinCheckpointInterval {
			t.Fatalf("one runner: floor %v, want %v", least, env.MinCheckpointInterval)
		}
		if n > 1 && least <= env.MinCheckpointInterval {
			t.Fatalf("%d runners: floor %v, no more than one runner's", n, least)
		}
		if light != env.LightCheckpointInterval {
			t.Fatalf("%d runners: light floor %v, want %v", n, light, env.LightCheckpointInterval)
		}
	}
}

// checkpointsStop waits for ten epochs of j, calls change, and fails t when j checkpoints
// again after the next look at what change set (looks counts them) and the checkpoint
// begun before it.
func checkpointsStop(t *testing.T, j *Job, looks *atomic.Int64, what string, change func()) {
	t.Helper()
	waitFor(t, "ten epochs", func() bool { return j.Stats().Epoch >= 10 })
	change()
	l0 := looks.Load()
	waitFor(t, "a look at "+what, func() bool { return looks.Load() > l0 })
	time.Sleep(50 * time.Millisecond) // a checkpoint begun before the look ends
	e0 := j.Stats().Epoch
	time.Sleep(300 * time.Millisecond)
	if e := j.Stats().Epoch; e > e0 {
		t.Fatalf("epoch %d, %d before: checkpoints with %s", e, e0, what)
	}
}

// trickledJob starts brokerPlan with in-memory state, env changed by set, over a topic of
// 100 events a queue where rows keep arriving (trickle), so that each checkpoint has
// something to record (an idle job takes none: TestIdleJobTakesNoCheckpoints). The job,
// the rows and the broker stop at the test's end.
func trickledJob(t *testing.T, name string, set func(*Env)) *Job {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	fillTopic(t, b, 100)
	env := brokerEnv(b, state.NewMemory(), true)
	set(&env)
	j, err := Start(context.Background(), name, brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go trickle(b, stop)
	return j
}

// After a light checkpoint the adaptive wait's floor is the light interval, after a heavier
// one the minimum: with a minimum of half an hour, a job whose checkpoints write a group of
// a one-letter key checkpoints again and again, and one whose checkpoints write a group of
// a 20 KiB key (more than LightCheckpointBytes) waits once its rows reach the aggregation.
func TestLightCheckpointInterval(t *testing.T) {
	for _, c := range []struct {
		name  string
		user  string
		light bool
	}{
		{"light", "t", true},
		{"heavy", strings.Repeat("u", 20<<10), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := openBrokerTopic(t, "events", 3)
			env := brokerEnv(b, state.NewMemory(), true)
			env.CheckpointInterval, env.MinCheckpointInterval = time.Hour, 30*time.Minute
			env.LightCheckpointInterval = time.Millisecond
			j, err := Start(context.Background(), "lj", brokerPlan(), env)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			stop := make(chan struct{})
			defer close(stop)
			// Rows on time (the events' delay is 200 ms), so that each changes the group.
			go trickleAs(b, stop, c.user, 1_796_000_000_000)
			if c.light {
				waitFor(t, "ten epochs", func() bool { return j.Stats().Epoch >= 10 })
				return
			}
			// Light checkpoints come until the rows reach the aggregation (through the
			// shuffle topic); then the epochs stop.
			waitFor(t, "rows in", func() bool { return j.Stats().RecordsIn >= 20 })
			time.Sleep(100 * time.Millisecond)
			e0 := j.Stats().Epoch
			time.Sleep(300 * time.Millisecond)
			if e := j.Stats().Epoch; e > e0+2 {
				t.Fatalf("epoch %d, %d before: heavy checkpoints taken at the light interval", e, e0)
			}
		})
	}
}

func TestCheckpointFloor(t *testing.T) {
	min, light := 10*time.Millisecond, 2*time.Millisecond
	for _, c := range []struct {
		bytes, before int64
		want          time.Duration
	}{
		{0, 0, light}, {200, 0, light}, {LightCheckpointBytes, 200, light},
		{LightCheckpointBytes + 1, 0, min}, {1 << 20, 0, min},
		{0, LightCheckpointBytes + 1, min}, // the look before was heavy
	} {
		if got := checkpointFloor(c.bytes, c.before, min, light); got != c.want {
			t.Errorf("%d bytes, %d before: floor %v, want %v", c.bytes, c.before, got, c.want)
		}
	}
}

func TestNextCheckpointWait(t *testing.T) {
	for _, c := range []struct{ cost, want time.Duration }{
		{0, 10 * time.Millisecond},                      // the minimum
		{3 * time.Millisecond, 30 * time.Millisecond},   // ten times the cost
		{500 * time.Millisecond, time.Second},           // the maximum
		{time.Millisecond / 2, 10 * time.Millisecond},   // the minimum again
		{50 * time.Millisecond, 500 * time.Millisecond}, // in between
	} {
		if got := nextCheckpointWait(c.cost, 10*time.Millisecond, time.Second); got != c.want {
			t.Errorf("cost %v: wait %v, want %v", c.cost, got, c.want)
		}
	}
}

// An outbox that reaches its bound asks for a checkpoint at once: with an interval of an
// hour, the output is still published.
func TestFullOutboxCheckpoints(t *testing.T) {
	defer func(n int) { maxOutboxBytes = n }(maxOutboxBytes)
	maxOutboxBytes = 1
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fillTopic(t, b, 500)
	env := brokerEnv(b, state.NewMemory(), true)
	env.CheckpointInterval = time.Hour
	j, err := Start(context.Background(), "fj", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	waitFor(t, "output published", func() bool { return len(topicBodies(t, b, "out")) > 0 })
	if j.Stats().Epoch == 0 {
		t.Fatal("output published without a checkpoint")
	}
}

// trickle appends one row to queue 0 of the topic "events" every millisecond until stop.
func trickle(b *broker.Broker, stop <-chan struct{}) { trickleAs(b, stop, "t", 1_000_000) }

// trickleAs is trickle with rows of the given user, the first at event time ts0.
func trickleAs(b *broker.Broker, stop <-chan struct{}, user string, ts0 int64) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
		body := event4{user: user, amount: 1, ts: ts0 + int64(i), n: 1}.body()
		if _, err := b.Append("events", 0, []broker.Message{{Body: []byte(body)}}); err != nil {
			return
		}
	}
}

// A job whose inputs bring nothing takes no checkpoints, even with an adaptive interval
// whose minimum is a millisecond; the first row after the pause wakes it, long before its
// (maximum) interval of an hour.
func TestIdleJobTakesNoCheckpoints(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fillTopic(t, b, 100)
	store := state.NewMemory()
	env := brokerEnv(b, store, true)
	env.CheckpointInterval, env.MinCheckpointInterval = time.Hour, time.Millisecond
	j, err := Start(context.Background(), "ij", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	waitFor(t, "the rows read", func() bool { s := j.Stats(); return s.RecordsIn >= 300 && s.Epoch >= 1 })
	// Once the splits have gone idle and their watermarks settled, nothing moves: the
	// epoch stays where it is (without the skip it would grow by hundreds in this time).
	// Stable means unchanged for longer than the idle timeout (300 ms): a split turning
	// idle raises the watermark, which is a change worth its checkpoint.
	var settled int64
	for stable, tries := 0, 0; stable < 10; tries++ {
		if tries == 200 {
			t.Fatalf("an idle job goes on checkpointing: epoch %d after %d looks", settled, tries)
		}
		time.Sleep(50 * time.Millisecond)
		if e := j.Stats().Epoch; e == settled {
			stable++
		} else {
			settled, stable = e, 0
		}
	}
	time.Sleep(300 * time.Millisecond)
	if e := j.Stats().Epoch; e > settled+1 {
		t.Fatalf("an idle job checkpointed: epoch %d, then %d", settled, e)
	}
	stop := make(chan struct{})
	defer close(stop)
	go trickle(b, stop)
	waitFor(t, "a checkpoint after new rows", func() bool { return j.Stats().Epoch > settled+1 })
}

// A commit group's epoch writes every part of every stage whichever arrives first, and the
// largest part takes in the others instead of being copied into a smaller one.
func TestCommitGroupKeepsTheLargestPart(t *testing.T) {
	var got *state.Batch
	j := &Job{name: "cg", env: Env{Commit: func(cp *CheckpointInfo) error { got = cp.State; return nil }}}
	g := newCommitGroup(j)
	g.stages = 3
	small, large, mid := &state.Batch{}, &state.Batch{}, &state.Batch{}
	small.Put([]byte("a"), []byte("1"))
	for i := range 100 {
		large.Put([]byte("b"+strconv.Itoa(i)), bytes.Repeat([]byte("x"), 100))
	}
	mid.Delete([]byte("c"))
	mid.Put([]byte("d"), []byte("22"))
	g.add(1, small, nil, nil)
	g.add(1, large, nil, nil)
	if err := g.add(1, mid, nil, nil).await(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got != large {
		t.Fatal("the epoch was not committed from the largest part")
	}
	ops := map[string]string{}
	if err := got.Each(func(kind state.OpKind, k, v []byte) error {
		ops[string(k)] = fmt.Sprint(kind, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// 100 + 1 + 2 parts' operations and the epoch's key.
	if len(ops) != 104 || ops["a"] != fmt.Sprint(state.OpPut, "1") || ops["c"] != fmt.Sprint(state.OpDelete, "") ||
		ops["d"] != fmt.Sprint(state.OpPut, "22") || ops["b99"] != fmt.Sprint(state.OpPut, strings.Repeat("x", 100)) {
		t.Fatalf("%d operations: a %q c %q d %q", len(ops), ops["a"], ops["c"], ops["d"])
	}
}

// One slow commit among fast ones does not set the next wait, and a lasting change in
// what commits cost moves it within three looks.
func TestRecentCostsMedian(t *testing.T) {
	const ms = time.Millisecond
	var c recentCosts
	for range 5 {
		c.add(ms)
	}
	if got := nextCheckpointWait(c.add(40*ms), 10*ms, time.Second); got != 10*ms {
		t.Fatalf("after one 40 ms commit among 1 ms ones: wait %v, want the 10 ms floor", got)
	}
	var got time.Duration
	looks := 0
	for got < 30*ms && looks < 10 {
		got = nextCheckpointWait(c.add(3*ms), 10*ms, time.Second)
		looks++
	}
	if looks > 3 {
		t.Fatalf("commits at 3 ms took %d looks to move the wait to %v", looks, got)
	}
	for range 3 {
		got = nextCheckpointWait(c.add(ms/2), 10*ms, time.Second)
	}
	if got != 10*ms {
		t.Fatalf("after three cheap commits: wait %v, want the floor", got)
	}
	var first recentCosts
	if got := first.add(7 * ms); got != 7*ms {
		t.Fatalf("first look: cost %v, want the one commit's 7 ms", got)
	}
}
