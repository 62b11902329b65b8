// Package serve is the request path: an App (a loaded rackup) is an
// http.Handler that admits a request, hands it to a VM (this process's,
// through internal/host, or a worker's, through internal/cluster/frontend)
// as one message, and writes the VM's answer to the client. Runtime is
// what the process's apps share: the stream table, the figures, the
// process's VM and the apps' worker pools.
package serve

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/host"
	"github.com/ruvoy/ruvoy/internal/tuning"

	"go.uber.org/zap"
)

// Options configure the process's VM and what its apps share. They take
// effect when the VM starts (with the first app that runs in this
// process) and for the worker processes of every app in cluster mode;
// later Start calls return the running Runtime and ignore them.
type Options struct {
	Program        string   // $0 for the app (default "ruvoy")
	Args           []string // ARGV for the app
	ResponseWindow int      // response bytes in flight per request (default 256 KiB)
	Logger         *zap.Logger
	// ProcsByLoad lowers GOMAXPROCS to 1 while requests come one at a
	// time (internal/tuning's Procs); RUVOY_PROCS_BY_LOAD=1 or 0
	// overrides it.
	ProcsByLoad bool
}

// Runtime is what the process's apps share.
type Runtime struct {
	vm         *host.VM // booted with the first app that runs in this process
	streams    *streams
	counters   counters
	writeCuts  writeCuts  // responses cut for the write timeout (writetimeout.go)
	queueTimes queueTimes // from a head's arrival to the app's call (queuetime.go)
	pumps      conn.Pumps // hijacked connections Go pumps (hijack.go)
	procs      *tuning.Procs
	apps       atomic.Int64 // apps loaded and not closed
	lastBoot   atomic.Pointer[BootError]
	stop       stopState // what the stop's lines say (stop.go)
	stopOnce   sync.Once
	exitCode   int
	release    sync.Once // memory given back once idle

	poolsMu sync.Mutex
	pools   map[*frontend.Pool]struct{} // the worker pools of apps not yet unloaded (pools.go)
}

// counters are the figures the metrics report (figures.go).
type counters struct {
	admitted, rejectedCount, rejectedBody, rejectedQueue atomic.Int64
	rejectedClient                                       atomic.Int64 // over max-requests-per-client
	queueWaitNs, queued                                  atomic.Int64
	connQueued                                           atomic.Int64 // waiting for a place of their own connection
	bodyHeld                                             atomic.Int64
	orphans                                              atomic.Int64
	direct                                               atomic.Int64 // requests whose handler waited on its own thread
	releases                                             atomic.Int64 // idle spells after which memory was given back
}

var (
	startMu sync.Mutex
	running *Runtime
)

// Current is the process's Runtime, or nil before it started.
func Current() *Runtime {
	startMu.Lock()
	defer startMu.Unlock()
	return running
}

// Start makes the process's Runtime once and returns it. Its VM boots
// with the first app loaded in this process (not in cluster mode, whose
// apps run in worker processes).
func Start(o Options) *Runtime {
	startMu.Lock()
	defer startMu.Unlock()
	if running == nil {
		running = newRuntime(o)
	}
	return running
}

func newRuntime(o Options) *Runtime {
	rt := &Runtime{streams: newStreams(host.MaxStreams), pools: map[*frontend.Pool]struct{}{}, procs: tuning.NewProcs(o.ProcsByLoad)}
	rt.vm = host.New(host.Config{Program: o.Program, Args: o.Args, ResponseWindow: o.ResponseWindow, Logger: o.Logger}, (*router)(rt))
	// Go pumps a hijacked connection's bytes: more than a lone request's
	// work (internal/tuning's Procs).
	rt.pumps.OnPump = rt.procs.Busy
	return rt
}

// Serving reports whether an app has loaded and not been closed since,
// and in cluster mode whether each app's pool has a worker that takes
// requests (not all of them restarting, stopped or frozen).
func (rt *Runtime) Serving() bool {
	if rt.apps.Load() == 0 {
		return false
	}
	for _, p := range rt.poolList() {
		if !p.Serving() {
			return false
		}
	}
	return true
}

// bootLocal boots this process's VM, once.
func (rt *Runtime) bootLocal() error {
	if err := rt.vm.Boot(); err != nil {
		return err
	}
	rt.releaseWhenIdle()
	return nil
}

// releaseWhenIdle starts giving memory back once the process is idle
// (tuning.ReleaseWhenIdle): with its own VM, or as a cluster's front end,
// whose Go heap a burst grows as well.
func (rt *Runtime) releaseWhenIdle() {
	rt.release.Do(func() {
		go tuning.ReleaseWhenIdle(rt.activity, func() {
			host.ReleaseMemory()
			rt.counters.releases.Add(1)
		})
	})
}

// activity is what the idle release watches: the requests seen so far
// (admitted or refused), and whether any is under way.
func (rt *Runtime) activity() (int64, bool) {
	c := &rt.counters
	seen := c.admitted.Load() + c.rejectedCount.Load() + c.rejectedBody.Load() + c.rejectedQueue.Load() + c.rejectedClient.Load()
	return seen, rt.streams.inUse() > 0
}

// OtherWork says that the server does work the app's requests do not
// count (a file --static sends): Go's processors go back to all, and stay
// until the app's requests come one at a time again after an overlap.
func (rt *Runtime) OtherWork() { rt.procs.Busy() }

// SetLogger replaces the logger the runtime writes to (a Caddy config
// reload brings a new one).
func (rt *Runtime) SetLogger(l *zap.Logger) { rt.vm.SetLogger(l) }

func (rt *Runtime) log() *zap.Logger { return rt.vm.Log() }

// VM is the process's VM, to set its hold detector (SetHoldWarn,
// SetHoldLimit), which the workers of cluster mode take too.
func (rt *Runtime) VM() *host.VM { return rt.vm }

// Load builds the Rack app in rackup (a config.ru) and returns it. A boot
// error comes back with Ruby's message and backtrace.
func (rt *Runtime) Load(rackup, environment string, o AppOptions) (*App, error) {
	var upstreams string
	if o.Upstream != nil {
		upstreams = strings.Join(o.Upstream.Names, ",")
	}
	dirs, err := openSendfileDirs(o.SendfileDirs)
	if err != nil {
		return nil, fmt.Errorf("ruvoy: a sendfile directory: %w", err)
	}
	var id uint64
	var pool *frontend.Pool
	if o.Workers > 0 {
		pool, err = rt.startPool(o, rackup, environment, upstreams)
	} else if id, err = rt.loadLocal(rackup, environment, upstreams); err == nil {
		rt.vm.SetGCWhenIdle(o.GCWhenIdle)
	}
	if err != nil {
		closeSendfileDirs(dirs)
		return nil, err
	}
	rt.apps.Add(1)
	a := newApp(rt, id, o, dirs)
	a.pool = pool
	return a, nil
}

// loadLocal loads an app in this process's VM, which it boots first.
func (rt *Runtime) loadLocal(rackup, environment, upstreams string) (uint64, error) {
	if err := rt.bootLocal(); err != nil {
		return 0, fmt.Errorf("ruvoy: starting Ruby: %w", err)
	}
	id, text := rt.vm.LoadApp(rackup, environment, upstreams)
	if id == 0 {
		return 0, rt.bootFailed(rackup, text)
	}
	// One process is its own worker: its boot hooks run before it serves.
	if text, ok := rt.vm.WorkerBoot(0); !ok {
		rt.vm.UnloadApp(id)
		return 0, rt.bootFailed(rackup, text)
	}
	return id, nil
}

// BootError is an app that failed to load: Message holds Ruby's error and
// backtrace as ruby would print them.
type BootError struct {
	Rackup  string
	Message string
}

func (rt *Runtime) bootFailed(rackup, message string) *BootError {
	e := &BootError{Rackup: rackup, Message: message}
	rt.lastBoot.Store(e)
	return e
}

// LastBootError is the last app that failed to load, or nil. Caddy flattens
// a module's error into its own message; the command line prints Ruby's
// error from here instead.
func (rt *Runtime) LastBootError() *BootError { return rt.lastBoot.Load() }

func (e *BootError) Error() string {
	return fmt.Sprintf("loading %s: %s", e.Rackup, strings.TrimRight(e.Message, "\n"))
}

// Shutdown stops the VMs once the servers have drained (the grace period
// is over): this process's (host.VM.Stop) and its apps' workers, each of
// which stops the same way. It returns the process's exit status: 0 when
// no request was cut short and every VM stopped cleanly, else the worst
// of theirs (host.ExitCutShort, host.ExitVMHeld, or ruby_cleanup's own).
func (rt *Runtime) Shutdown() int {
	rt.stopOnce.Do(func() {
		rt.closeHijacked()
		done := make(chan int, 1)
		go func() { done <- rt.stopPools() }()
		held := rt.streams.inUse() // in this process's VM, or waiting for it
		code, cut := rt.vm.Stop()
		if cut > 0 {
			rt.stop.cut.Store(int64(max(cut, held)))
		}
		rt.exitCode = max(code, <-done)
	})
	return rt.exitCode
}

// closeHijacked closes the hijacked connections Go pumps, and says how
// many the apps hold (the others close as the VMs stop): the server is
// stopping.
func (rt *Runtime) closeHijacked() {
	n := rt.pumps.CloseAll()
	if n = max(rt.Stats().Hijacked, n); n > 0 {
		rt.log().Info("ruvoy: closing hijacked connections (WebSockets and the like): the server is stopping", zap.Int("connections", n))
	}
}
