package ruvoy

import (
	"os"
	"runtime"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// directWait is how long a handler waits on its own thread for its
// request's messages (internal/vm/rv_direct.c) before it leaves them to the
// dispatcher: long enough for a quick answer, short enough that a thread
// held in C and a client not watched cost little.
const directWait = time.Millisecond

// directSlots is how many handlers may wait on their own threads at once:
// one fewer than Go's processors, so that one always runs the scheduler
// and the netpoller (a thread waiting in C keeps its processor), or
// RUVOY_DIRECT (0 turns it off).
func (rt *Runtime) directSlots() int {
	n := runtime.GOMAXPROCS(0) - 1
	if s, ok := os.LookupEnv("RUVOY_DIRECT"); ok {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 {
			return v
		}
		rt.log().Warn("ruvoy: RUVOY_DIRECT is not a number of handlers: using the default", zap.String("RUVOY_DIRECT", s), zap.Int("default", n))
	}
	return n
}

// loneRun is how many requests in a row must have found no other in
// flight before a handler waits on its own thread: requests one after
// another (one client, or a few that take turns) gain from it; under
// load the dispatcher's one wake-up carries many messages, and a thread
// held in C costs the other requests a processor.
const loneRun = 8

// arrive counts a request into the app and says whether requests come one
// at a time (loneRun in a row found no other in flight).
func (a *App) arrive() bool {
	if a.inflight.Add(1) != 1 {
		if a.lone.Load() != 0 { // no store per request under load
			a.lone.Store(0)
		}
		a.rt.procs.Busy()
		return false
	}
	if a.lone.Load() > loneRun {
		return true
	}
	n := a.lone.Add(1)
	if n == loneRun+1 && !a.rt.pumps.Any() {
		a.rt.procs.Lone()
	}
	return n > loneRun
}

// claimDirect reserves a direct slot for a request about to go to this
// process's VM when requests come one at a time; -1 when it gets none.
func claimDirect(l vmLink, id uint64, hasBody, alone bool) int {
	if _, local := l.(localVM); !local || hasBody || !alone {
		return -1
	}
	return ruby.DirectClaim(id)
}

// waitDirect waits for the request's messages and routes them; false when
// none came in time and the slot was given back.
func (rt *Runtime) waitDirect(slot int) bool {
	if m := ruby.DirectWait(slot, directWait); m != nil {
		rt.routeAll(m)
		return true
	}
	rt.releaseDirect(slot)
	return false
}

// pollDirect routes the request's messages that come while this thread
// yields its core briefly, without sleeping; false when none came. A
// handler looks once more before it first flushes what it wrote, so that
// an answer whose end follows its head at once goes out in one piece
// (with Content-Length), as when the dispatcher hands both over together.
// Later flushes do not wait: they credit a VM that may be waiting for it.
func (rt *Runtime) pollDirect(slot int) bool {
	if m := ruby.DirectWait(slot, 0); m != nil {
		rt.routeAll(m)
		return true
	}
	return false
}

// releaseDirect gives the slot back, routing what it still holds first.
func (rt *Runtime) releaseDirect(slot int) {
	for m := ruby.DirectRelease(slot); m != nil; m = ruby.DirectRelease(slot) {
		rt.routeAll(m)
	}
}
