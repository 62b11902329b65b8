package host

import (
	"sync/atomic"
	"time"
)

// quietLook is how often the hold detector looks while the VM thread
// has been asleep at every look for a second.
const quietLook = 250 * time.Millisecond

// DefaultHoldWarn is how long Ruby code may hold the VM thread before the
// hold detector logs where.
const DefaultHoldWarn = 100 * time.Millisecond

// A heldVM is what the hold detector reads and asks of the VM thread.
type heldVM interface {
	// Held says since when Ruby code has held the VM thread (0: the
	// loop has it) and since when the thread has been awake (0: asleep),
	// on Now's clock.
	Held() (since, awake uint64)
	Now() uint64
	// HoldReport has the VM log the backtrace of the Ruby code that has
	// held its thread since since, if it still does.
	HoldReport(since uint64)
}

// detector is the hold detector: when Ruby code has held the VM thread past
// Warn without giving it back to the event loop, it calls OnHold and has
// the VM log the request and the Ruby backtrace (rv_hold.c), once per
// hold. Past Limit, it calls OnLimit (the runtime exits the process, so
// that a supervisor starts a fresh one: every other request has waited
// that long).
//
// While the VM thread sleeps, nothing can hold it: after a second of that
// the detector looks every quietLook, not every few milliseconds, so an
// idle server costs no wakeups to speak of; a hold that begins then is
// named up to quietLook later.
type detector struct {
	VM      heldVM
	Warn    atomic.Int64 // time.Duration; 0: off
	Limit   atomic.Int64 // time.Duration; 0: never
	OnHold  func()
	OnLimit func(since uint64, held time.Duration)
}

// run looks at the VM thread; it never returns.
func (w *detector) run() {
	var reported uint64
	lastAwake := time.Now()
	for {
		warn := time.Duration(w.Warn.Load())
		limit := time.Duration(w.Limit.Load())
		tick := time.Second
		for _, d := range []time.Duration{warn, limit} {
			if d > 0 {
				tick = min(tick, d/4)
			}
		}
		if time.Since(lastAwake) > time.Second {
			tick = max(tick, quietLook)
		}
		time.Sleep(max(tick, 10*time.Millisecond))
		since, awake := w.VM.Held()
		if awake != 0 || since != 0 {
			lastAwake = time.Now()
		}
		if since == 0 {
			continue
		}
		now := w.VM.Now()
		held := time.Duration(now - since)
		if warn > 0 && since != reported && now > since && held > warn {
			reported = since
			w.OnHold()
			w.VM.HoldReport(since)
		}
		if limit > 0 && now > since && held > limit {
			w.VM.HoldReport(since) // the backtrace, if Ruby reaches a safe point
			w.OnLimit(since, held)
		}
	}
}
