package tuning

import (
	"runtime/debug"
	"time"
)

// idleRelease is how long ruvoy must see no request before it gives memory
// back.
const idleRelease = 2 * time.Second

// ReleaseWhenIdle gives the kernel back the memory a burst left free, once
// the server has had no request for idleRelease: malloc keeps freed pages
// in its arenas (up to 8 MiB each, rv_malloc.c) and Go keeps its heap until
// a later collection, so after a body overload or a run of large responses
// RSS would stay near its peak. Once per idle spell: a collection and a
// trim cost a few milliseconds, and no request waits for them. activity
// counts the requests seen so far and says whether any is under way;
// trim gives back malloc's free memory, after Go's heap: the collection
// that releases it may free C memory too, and trim's end is the release's
// (the counter moves there, for the metrics). It never returns.
func ReleaseWhenIdle(activity func() (seen int64, busy bool), trim func()) {
	last := int64(-1)
	released := true
	var idleSince time.Time
	for {
		time.Sleep(idleRelease / 2)
		seen, busy := activity()
		if seen != last || busy {
			last, released, idleSince = seen, false, time.Now()
			continue
		}
		if !released && time.Since(idleSince) >= idleRelease {
			debug.FreeOSMemory()
			trim()
			released = true
		}
	}
}
