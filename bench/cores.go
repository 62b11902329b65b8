package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// The cores' speed. On this machine the host at times slows one vCPU for
// minutes (a fixed loop pinned there takes 1.7-2.7 times as long as on the
// other, nothing else running), then gives it back. A round measured then
// says more about the host than about the servers: a worker or thread on
// the slowed core does 40-60% of the work. Each measurement is bracketed
// by a probe of every core, and the summary leaves out the rounds in which
// a core was slowed (coreSlowed).

// coreSlowed is how much slower than the run's fastest probe a core may
// run before its round is left out. The probe's spread on a quiet machine
// is a few percent, up to 1.4 times right after a Rails round; the host's
// slowing is 1.7 times or more.
const coreSlowed = 1.5

// probeCores times a fixed loop on each CPU in turn, on a thread pinned
// there; a CPU it cannot pin to gets no figure (0).
func probeCores() []time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all unix.CPUSet
	if unix.SchedGetaffinity(0, &all) != nil {
		return nil
	}
	defer unix.SchedSetaffinity(0, &all)
	times := make([]time.Duration, runtime.NumCPU())
	for cpu := range times {
		if !all.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if unix.SchedSetaffinity(0, &one) != nil {
			continue
		}
		// The shorter of two tries: a moment's preemption is not the
		// host's slowing, which lasts minutes.
		for try := 0; try < 2; try++ {
			start := time.Now()
			spin(10_000_000)
			if t := time.Since(start); times[cpu] == 0 || t < times[cpu] {
				times[cpu] = t
			}
		}
	}
	return times
}

var spinSink uint64

// spin is integer work the compiler cannot drop: ~17 ms for 10 million
// steps on this machine's cores at full speed.
func spin(n int) {
	x := uint64(88172645463325252)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink = x
}

// perCore is each core's longer time of two probes: how slowly it ran,
// before or after the measurement.
func perCore(before, after []time.Duration) []time.Duration {
	times := append([]time.Duration(nil), before...)
	for cpu := range times {
		if cpu < len(after) {
			times[cpu] = max(times[cpu], after[cpu])
		}
	}
	return times
}
