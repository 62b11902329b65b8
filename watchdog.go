package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import "time"

// DefaultStallWarn is how long Ruby code may hold the VM thread before the
// stall detector logs where.
const DefaultStallWarn = 100 * time.Millisecond

// SetStallWarn sets the stall threshold (0 turns the detector off).
func (rt *Runtime) SetStallWarn(d time.Duration) { rt.stallWarn.Store(int64(d)) }

// watch is the stall detector: when Ruby code has held the VM thread past
// the threshold without giving it back to the event loop, it counts the
// stall and has the VM log the request and the Ruby backtrace (rv_stall.c),
// once per stall.
func (rt *Runtime) watch() {
	var reported uint64
	for {
		limit := time.Duration(rt.stallWarn.Load())
		tick := limit / 4
		if limit <= 0 {
			tick = time.Second
		}
		time.Sleep(max(tick, 10*time.Millisecond))
		if limit <= 0 {
			continue
		}
		var s C.rv_vm_stats
		C.rv_read_stats(&s)
		since := uint64(s.running_since)
		if since == 0 || since == reported {
			continue
		}
		if now := uint64(C.rv_monotonic_ns()); now > since && time.Duration(now-since) > limit {
			reported = since
			rt.counters.stalls.Add(1)
			C.rv_stall_check(C.uint64_t(since))
		}
	}
}
