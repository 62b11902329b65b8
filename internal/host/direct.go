package host

import (
	"os"
	"runtime"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Direct lines (internal/vm/rv_direct.c): a request's handler waits for
// the VM's answer on its own thread, when requests come one at a time
// (docs/architecture.md, "Requests one at a time").

// directWait is how long a handler waits on its own thread for its
// request's messages before it leaves them to the dispatcher: long enough
// for a quick answer, short enough that a thread held in C and a client
// not watched cost little.
const directWait = time.Millisecond

// directLines is how many handlers may wait on their own threads at once:
// one fewer than Go's processors, so that one always runs the scheduler
// and the netpoller (a thread waiting in C keeps its processor), or
// RUVOY_DIRECT (0 turns it off).
func (v *VM) directLines() int {
	n := runtime.GOMAXPROCS(0) - 1
	if s, ok := os.LookupEnv("RUVOY_DIRECT"); ok {
		if d, err := strconv.Atoi(s); err == nil && d >= 0 {
			return d
		}
		v.Log().Warn("ruvoy: RUVOY_DIRECT is not a number of handlers: using the default", zap.String("RUVOY_DIRECT", s), zap.Int("default", n))
	}
	return n
}

// ClaimDirect reserves a direct line for a request about to go to the VM
// (stream: its id): what the VM sends for it goes to the line from then
// on. -1 when none is free.
func (v *VM) ClaimDirect(stream uint64) int { return ruby.DirectClaim(stream) }

// WaitDirect waits for the request's messages and routes them; false when
// none came in time and the line was given back.
func (v *VM) WaitDirect(line int) bool {
	if m := ruby.DirectWait(line, directWait); m != nil {
		v.router.Route(m)
		return true
	}
	v.ReleaseDirect(line)
	return false
}

// PollDirect routes the request's messages that come while this thread
// yields its core briefly, without sleeping; false when none came. A
// handler looks once more before it first flushes what it wrote, so that
// an answer whose end follows its head at once goes out in one piece
// (with Content-Length), as when the dispatcher hands both over together.
// Later flushes do not wait: they credit a VM that may be waiting for it.
func (v *VM) PollDirect(line int) bool {
	if m := ruby.DirectWait(line, 0); m != nil {
		v.router.Route(m)
		return true
	}
	return false
}

// ReleaseDirect gives the line back, routing what it still holds first.
func (v *VM) ReleaseDirect(line int) {
	for m := ruby.DirectRelease(line); m != nil; m = ruby.DirectRelease(line) {
		v.router.Route(m)
	}
}
