package ruvoy

import (
	"os"
	"time"

	"go.uber.org/zap"
)

// Ruby code holding the VM thread: the hold detector (internal/tuning's
// Watch) watches this process's VM; its settings are the runtime's.

// SetHoldWarn sets how long Ruby code may hold the VM thread before the
// hold detector names it (0 turns the detector off).
func (rt *Runtime) SetHoldWarn(d time.Duration) { rt.watch.Warn.Store(int64(d)) }

// SetHoldLimit sets how long Ruby code may hold the VM thread before the
// process exits (0: never).
func (rt *Runtime) SetHoldLimit(d time.Duration) { rt.watch.Limit.Store(int64(d)) }

// heldWatch is the VM as the hold detector reads it.
type heldWatch struct{}

func (heldWatch) Held() (since, awake uint64) {
	s := ruby.ReadStats()
	return s.HeldSince, s.AwakeSince
}
func (heldWatch) Now() uint64             { return ruby.Now() }
func (heldWatch) HoldReport(since uint64) { ruby.HoldReport(since) }

// exitHeld ends the process whose VM thread Ruby code has held past the
// hold limit, once the backtrace had a chance to be logged.
func (rt *Runtime) exitHeld(since uint64, held time.Duration) {
	time.Sleep(time.Second)
	s := rt.localStats()
	fields := []zap.Field{zap.Duration("held", held.Round(time.Millisecond))}
	if method, path, ok := rt.streams.describe(s.HeldStream); ok {
		fields = append(fields, zap.String("method", method), zap.String("path", path))
	}
	rt.log().Error("ruvoy: Ruby code has held the VM thread past the hold limit: exiting so that a fresh process can serve", fields...)
	os.Exit(ExitVMHeld)
}

// activity is what the idle release watches: the requests seen so far
// (admitted, relayed to a worker's VM, refused), and whether any is under
// way.
func (rt *Runtime) activity() (int64, bool) {
	c := &rt.counters
	relayed, running := ruby.RelayCounts() // a worker's requests (rv_relay.c)
	seen := c.admitted.Load() + int64(relayed) + c.rejectedCount.Load() + c.rejectedBody.Load() + c.rejectedQueue.Load() + c.rejectedClient.Load()
	return seen, rt.streams.inUse() > 0 || running > 0
}

// OtherWork says that the server does work the app's requests do not
// count (a file --static sends): Go's processors go back to all, and stay
// until the app's requests come one at a time again after an overlap.
func (rt *Runtime) OtherWork() { rt.procs.Busy() }
