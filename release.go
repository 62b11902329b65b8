package ruvoy

import (
	"runtime/debug"
	"time"
)

// idleRelease is how long ruvoy must see no request before it gives memory
// back.
const idleRelease = 2 * time.Second

// releaseWhenIdle gives the kernel back the memory a burst left free, once
// the server has had no request for idleRelease: malloc keeps freed pages
// in its arenas (up to 8 MiB each, rv_malloc.c) and Go keeps its heap until
// a later collection, so after a body overload or a run of large responses
// RSS would stay near its peak. Once per idle spell: a collection and a
// trim cost a few milliseconds, and no request waits for them.
func (rt *Runtime) releaseWhenIdle() {
	last := int64(-1)
	released := true
	var idleSince time.Time
	for {
		time.Sleep(idleRelease / 2)
		c := &rt.counters
		relayed, running := ruby.RelayCounts() // a worker's requests (rv_relay.c)
		seen := c.admitted.Load() + int64(relayed) + c.rejectedCount.Load() + c.rejectedBody.Load() + c.rejectedQueue.Load()
		if seen != last || rt.streams.inUse() > 0 || running > 0 {
			last, released, idleSince = seen, false, time.Now()
			continue
		}
		if !released && time.Since(idleSince) >= idleRelease {
			ruby.ReleaseMemory()
			debug.FreeOSMemory()
			released = true
		}
	}
}
