package tuning

import (
	"sync/atomic"
	"testing"
	"time"
)

// Memory is given back once per idle spell: not while requests come or
// one is under way, once when none has come for idleRelease, and not
// again until after the next request.
func TestReleaseOncePerIdleSpell(t *testing.T) {
	var seen atomic.Int64
	var busy atomic.Bool
	var trims atomic.Int64
	busy.Store(true)
	go ReleaseWhenIdle(func() (int64, bool) { return seen.Load(), busy.Load() }, func() { trims.Add(1) })
	time.Sleep(3 * idleRelease / 2)
	if trims.Load() != 0 {
		t.Fatal("released while a request was under way")
	}
	busy.Store(false)
	waitFor(t, func() bool { return trims.Load() == 1 })
	time.Sleep(2 * idleRelease)
	if n := trims.Load(); n != 1 {
		t.Fatalf("released %d times in one idle spell", n)
	}
	seen.Add(1)
	waitFor(t, func() bool { return trims.Load() == 2 })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 10 s")
		}
	}
}
