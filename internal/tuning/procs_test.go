package tuning

import (
	"runtime"
	"testing"
)

// Procs lowers Go's processors to one for a lone run and gives them all
// back at the first request that finds another, once each; off (the
// environment's word, or a GOMAXPROCS set), it never changes them.
func TestProcsFollowTheLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	t.Setenv(ProcsByLoadEnv, "")
	p := NewProcs(true)
	p.Lone()
	p.Lone()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("in a lone run: %d processors, want 1", n)
	}
	p.Busy()
	p.Busy()
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Fatalf("after it: %d processors, want 4", n)
	}
	if c := p.Changes(); c != 2 {
		t.Fatalf("%d changes, want 2", c)
	}

	t.Setenv(ProcsByLoadEnv, "0")
	off := NewProcs(true)
	off.Lone()
	if n := runtime.GOMAXPROCS(0); n != 4 || off.Changes() != 0 {
		t.Fatalf("turned off by %s=0: %d processors, %d changes", ProcsByLoadEnv, n, off.Changes())
	}
	t.Setenv(ProcsByLoadEnv, "1")
	t.Setenv("GOMAXPROCS", "4")
	set := NewProcs(true)
	set.Lone()
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Fatalf("with GOMAXPROCS set: %d processors", n)
	}
}
