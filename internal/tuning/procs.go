// Package tuning is what the runtime does to the process around the
// requests: Go's processors lowered while requests come one at a time
// (procs.go), and memory given back once idle (release.go).
package tuning

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// ProcsByLoadEnv overrides NewProcs' on: "1" on, "0" off. ruvoy's command
// line turns it on for the server it builds; under a config of one's own
// it is off unless set. A GOMAXPROCS in the environment turns it off.
const ProcsByLoadEnv = "RUVOY_PROCS_BY_LOAD"

// Procs lowers GOMAXPROCS to 1 while requests come one at a time
// (the runtime's lone run: Lone) and gives back what it was as soon as a request
// finds another in flight. With more processors, every goroutine made
// ready has Go's scheduler wake an idle processor's thread to look for
// work that a lone request never has, and on this machine each such
// wake-up costs tens of µs (docs/benchmarks.md, "One connection").
// GOMAXPROCS is the whole process's: a server that also serves other
// routes would have them share one processor meanwhile, hence off where
// ruvoy cannot see them (a config of one's own). What it can see gives
// the processors back: a file --static sends (OtherWork), and Go pumping
// hijacked connections (TLS or HTTP/2 WebSockets), whose bytes are work
// no request counts; while any is pumped a lone run does not lower them.
type Procs struct {
	full    int          // GOMAXPROCS to give back; 0: off
	low     atomic.Bool  // GOMAXPROCS is 1
	changes atomic.Int64 // how often it changed (a metric)
	mu      sync.Mutex   // orders the changes (each stops the world briefly)
}

// NewProcs makes the processors' tuning, on or off (ProcsByLoadEnv has
// the last word).
func NewProcs(on bool) *Procs {
	p := &Procs{}
	switch os.Getenv(ProcsByLoadEnv) {
	case "1":
		on = true
	case "0":
		on = false
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); on && !set {
		if n := runtime.GOMAXPROCS(0); n > 1 {
			p.full = n
		}
	}
	return p
}

// Lone is told that a lone run began.
func (p *Procs) Lone() {
	if p.full == 0 || p.low.Load() {
		return
	}
	p.mu.Lock()
	if !p.low.Load() {
		runtime.GOMAXPROCS(1)
		p.low.Store(true)
		p.changes.Add(1)
	}
	p.mu.Unlock()
}

// Busy is told of every request that found another in flight, and of
// other work: a load check per request under load, a change only when the
// run just ended.
func (p *Procs) Busy() {
	if !p.low.Load() {
		return
	}
	p.mu.Lock()
	if p.low.Load() {
		runtime.GOMAXPROCS(p.full)
		p.low.Store(false)
		p.changes.Add(1)
	}
	p.mu.Unlock()
}

// Changes is how often the processors changed (a metric).
func (p *Procs) Changes() int64 { return p.changes.Load() }
