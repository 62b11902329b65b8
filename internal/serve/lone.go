package serve

// Requests one at a time (docs/architecture.md): a handler waits for its
// answer on its own thread (host's direct lines), and Go's processors go
// down to one (internal/tuning's Procs).

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

// claimDirect reserves a direct line for q, about to go to this process's
// VM, when requests come one at a time (alone); -1 when it gets none.
// Requests with a body, and requests in cluster mode, always go through
// the dispatcher.
func (a *App) claimDirect(q *request, alone bool) int {
	if _, local := q.link.(localVM); !local || q.hasBody || !alone {
		return -1
	}
	line := a.rt.vm.ClaimDirect(q.id)
	if line >= 0 {
		a.rt.counters.direct.Add(1)
	}
	return line
}
