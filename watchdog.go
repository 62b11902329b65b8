package ruvoy

import (
	"os"
	"time"

	"go.uber.org/zap"
)

// quietLook is how often the stall detector looks while the VM thread
// has been asleep at every look for a second.
const quietLook = 250 * time.Millisecond

// DefaultStallWarn is how long Ruby code may hold the VM thread before the
// stall detector logs where.
const DefaultStallWarn = 100 * time.Millisecond

// SetStallWarn sets the stall threshold (0 turns the detector off).
func (rt *Runtime) SetStallWarn(d time.Duration) { rt.stallWarn.Store(int64(d)) }

// SetHoldLimit sets how long Ruby code may hold the VM thread before the
// process exits (0: never).
func (rt *Runtime) SetHoldLimit(d time.Duration) { rt.holdLimit.Store(int64(d)) }

// watch is the stall detector: when Ruby code has held the VM thread past
// the threshold without giving it back to the event loop, it counts the
// stall and has the VM log the request and the Ruby backtrace (rv_stall.c),
// once per stall. Past the hold limit, it exits the process (ExitVMHeld)
// so that a supervisor starts a fresh one: every other request has waited
// that long.
//
// While the VM thread sleeps, nothing can hold it: after a second of that
// the detector looks every quietLook, not every few milliseconds, so an
// idle server costs no wakeups to speak of; a stall that begins then is
// named up to quietLook later.
func (rt *Runtime) watch() {
	var reported uint64
	lastAwake := time.Now()
	for {
		warn := time.Duration(rt.stallWarn.Load())
		hold := time.Duration(rt.holdLimit.Load())
		tick := time.Second
		for _, d := range []time.Duration{warn, hold} {
			if d > 0 {
				tick = min(tick, d/4)
			}
		}
		if time.Since(lastAwake) > time.Second {
			tick = max(tick, quietLook)
		}
		time.Sleep(max(tick, 10*time.Millisecond))
		s := ruby.ReadStats()
		since := s.RunningSince
		if s.AwakeSince != 0 || since != 0 {
			lastAwake = time.Now()
		}
		if since == 0 {
			continue
		}
		now := ruby.Now()
		held := time.Duration(now - since)
		if warn > 0 && since != reported && now > since && held > warn {
			reported = since
			rt.counters.stalls.Add(1)
			ruby.StallCheck(since)
		}
		if hold > 0 && now > since && held > hold {
			rt.exitHeld(since, held)
		}
	}
}

// exitHeld ends the process whose VM thread Ruby code has held past the
// hold limit, once the backtrace had a chance to be logged.
func (rt *Runtime) exitHeld(since uint64, held time.Duration) {
	ruby.StallCheck(since) // the backtrace, if Ruby reaches a safe point
	time.Sleep(time.Second)
	s := rt.localStats()
	fields := []zap.Field{zap.Duration("held", held.Round(time.Millisecond))}
	if method, path, ok := rt.streams.describe(s.RunningStream); ok {
		fields = append(fields, zap.String("method", method), zap.String("path", path))
	}
	rt.log().Error("ruvoy: Ruby code has held the VM thread past the hold limit: exiting so that a fresh process can serve", fields...)
	os.Exit(ExitVMHeld)
}
