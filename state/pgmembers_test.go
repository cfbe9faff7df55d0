package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPostgresMembers(t *testing.T) {
	ctx := context.Background()
	schema := newTestSchema()
	a := openTestPostgres(t, schema)
	b := openTestPostgres(t, schema)
	if err := a.Heartbeat(ctx, "x", time.Second); err == nil {
		t.Fatal("heartbeat before any Join succeeded")
	}
	ma, err := a.Join(ctx, "a", "127.0.0.1:1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.Join(ctx, "b", "127.0.0.1:2", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ma.Num == mb.Num || ma.Num <= 0 || mb.Num <= 0 {
		t.Fatalf("member numbers %d, %d: want distinct and positive", ma.Num, mb.Num)
	}
	live, err := a.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].Name != "a" || live[1].Name != "b" || live[1].Addr != "127.0.0.1:2" || live[1].Num != mb.Num {
		t.Fatalf("members %+v: want a and b", live)
	}
	// b's lease runs out unless renewed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		live, err = a.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's 300ms lease has not expired: %+v", live)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if live[0].Name != "a" {
		t.Fatalf("live after b's lease expired: %+v", live)
	}
	// A heartbeat renews it; a re-join keeps the number.
	if err := b.Heartbeat(ctx, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if live, _ = a.Members(ctx); len(live) != 2 {
		t.Fatalf("after b's heartbeat: %+v", live)
	}
	again, err := b.Join(ctx, "b", "127.0.0.1:3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if again.Num != mb.Num {
		t.Fatalf("re-join gave number %d, want %d", again.Num, mb.Num)
	}
	if err := a.Leave(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if live, _ = b.Members(ctx); len(live) != 1 || live[0].Name != "b" || live[0].Addr != "127.0.0.1:3" {
		t.Fatalf("after a left: %+v", live)
	}
	if err := a.Heartbeat(ctx, "nobody", time.Second); !errors.Is(err, ErrNotMember) {
		t.Fatalf("heartbeat of an unknown name: %v, want ErrNotMember", err)
	}
	for _, sp := range []string{"2", "@a", "0"} {
		if _, err := a.Acquire(ctx, "j", sp, "a"); err != nil {
			t.Fatal(err)
		}
	}
	a.Acquire(ctx, "other", "9", "a")
	if got, err := b.JobSplits(ctx, "j"); err != nil || len(got) != 2 || got[0] != "0" || got[1] != "2" {
		t.Fatalf("JobSplits(j) = %v, %v; want [0 2]", got, err)
	}
	gen, _ := b.Acquire(ctx, "j", "0", "b")
	if err := b.Release(ctx, "j", "0", gen); err != nil {
		t.Fatal(err)
	}
	if got, err := a.SplitOwners(ctx, "j"); err != nil || len(got) != 2 || got["2"] != "a" || got["@a"] != "a" {
		t.Fatalf("SplitOwners(j) = %v, %v; want 2 and @a owned by a (0 released)", got, err)
	}
}
