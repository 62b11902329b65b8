package host

import (
	"os"
	"time"

	"go.uber.org/zap"
)

// Ruby code holding the VM thread: the hold detector (detector.go) looks
// at this process's VM.

// SetHoldWarn sets how long Ruby code may hold the VM thread before the
// hold detector names it (0 turns the detector off).
func (v *VM) SetHoldWarn(d time.Duration) { v.holdDet.Warn.Store(int64(d)) }

// SetHoldLimit sets how long Ruby code may hold the VM thread before the
// process exits (0: never).
func (v *VM) SetHoldLimit(d time.Duration) { v.holdDet.Limit.Store(int64(d)) }

// HoldWarn and HoldLimit are the detector's settings, which a cluster's
// workers take too.
func (v *VM) HoldWarn() time.Duration  { return time.Duration(v.holdDet.Warn.Load()) }
func (v *VM) HoldLimit() time.Duration { return time.Duration(v.holdDet.Limit.Load()) }

// portHeld is the VM as the hold detector reads it.
type portHeld struct{}

func (portHeld) Held() (since, awake uint64) { return ruby.Held() }
func (portHeld) Now() uint64                 { return ruby.Now() }
func (portHeld) HoldReport(since uint64)     { ruby.HoldReport(since) }

// exitHeld ends the process whose VM thread Ruby code has held past the
// hold limit, once the backtrace had a chance to be logged.
func (v *VM) exitHeld(since uint64, held time.Duration) {
	time.Sleep(time.Second)
	v.Log().Error("ruvoy: Ruby code has held the VM thread past the hold limit: exiting so that a fresh process can serve",
		v.heldFields(held)...)
	os.Exit(ExitVMHeld)
}

// heldFields name a hold in a log line: how long, and the request.
func (v *VM) heldFields(held time.Duration) []zap.Field {
	fields := []zap.Field{zap.Duration("held", held.Round(time.Millisecond))}
	if method, path, ok := v.router.Describe(ruby.ReadStats().HeldStream); ok {
		fields = append(fields, zap.String("method", method), zap.String("path", path))
	}
	return fields
}
