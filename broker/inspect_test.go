package broker

import (
	"bytes"
	"maps"
	"testing"
)

// Peek reads what Pull would, from any offset, without counting the messages as served.
func TestPeekAndGroupOffsets(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	if err := b.CreateTopic("ab", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("a", 1); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "ab", 1, 0, 30)
	served := b.MessagesServed()
	msgs, err := b.Peek("ab", 1, 25, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("peek from 25 of 30: %d messages", len(msgs))
	}
	for i, m := range msgs {
		if m.QueueOffset != int64(25+i) || !bytes.Equal(m.Body, body(1, 25+i)) || m.Topic != "ab" || m.Queue != 1 {
			t.Errorf("message %d: offset %d queue %d body %q", i, m.QueueOffset, m.Queue, m.Body)
		}
	}
	if msgs, err := b.Peek("ab", 1, 30, 10); err != nil || len(msgs) != 0 {
		t.Errorf("peek at the end: %d %v", len(msgs), err)
	}
	if msgs, err := b.Peek("ab", 0, 0, 10); err != nil || len(msgs) != 0 {
		t.Errorf("peek of an empty queue: %d %v", len(msgs), err)
	}
	if _, err := b.Peek("ab", 2, 0, 1); err == nil {
		t.Error("peek of queue 2 of 2 did not fail")
	}
	if got := b.MessagesServed(); got != served {
		t.Errorf("peek counted %d messages as served", got-served)
	}

	b.CommitOffset("g1", "ab", 1, 20)
	b.CommitOffset("g1", "a", 0, 3)
	b.CommitOffset("g2", "ab", 0, 0)
	got := b.TopicGroupOffsets("ab")
	want := map[string]map[int]int64{"g1": {1: 20}, "g2": {0: 0}}
	if len(got) != len(want) || !maps.Equal(got["g1"], want["g1"]) || !maps.Equal(got["g2"], want["g2"]) {
		t.Errorf("group offsets of ab: %v, want %v", got, want)
	}
	if got := b.TopicGroupOffsets("a"); len(got) != 1 || got["g1"][0] != 3 {
		t.Errorf("group offsets of a: %v", got)
	}
	if g := b.ConsumerGroups(); len(g) != 2 || g[0] != "g1" || g[1] != "g2" {
		t.Errorf("groups %v", g)
	}
}
