// Package ruvoy runs Rack applications in a CRuby VM embedded in the Go
// process. The VM lives on its own C thread; requests and responses cross as
// owned messages (see docs/architecture.md). Runtime is the VM; App is one
// loaded rackup, an http.Handler.
package ruvoy

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/tuning"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// Version is ruvoy's version.
const Version = "0.1.0"

// Options configure the VM. They take effect when the process's one VM
// starts (with the first app that runs in this process) and for the
// worker processes of every app in cluster mode; later Start calls return
// the running Runtime and ignore them.
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

const (
	defaultResponseWindow = 256 << 10
	maxStreams            = 1 << 16 // the stream table's size: every request in Ruby has a stream
)

// Runtime is the process's Ruby VM, and the worker processes of its apps
// in cluster mode (workers.go).
type Runtime struct {
	opts      Options
	bootMu    sync.Mutex
	local     atomic.Bool // this process's VM runs
	logger    atomic.Pointer[zap.Logger]
	streams   *streams
	controlMu sync.Mutex // one control exchange (load, unload) at a time
	replies   chan reply
	stopOnce  sync.Once
	exitCode  int
	counters  counters
	writeCuts writeCuts // responses cut for the write timeout (writetimeout.go)
	procs     *tuning.Procs
	watch     tuning.Watch // the hold detector
	apps      atomic.Int64 // apps loaded and not closed
	lastBoot  atomic.Pointer[BootError]
	stop      stopState // what the stop's lines say (stop.go)
	release   sync.Once // memory given back once idle, in any process that serves

	dispatching atomic.Bool // the dispatcher may hold messages it took (drainInbox)

	pumps conn.Pumps // hijacked connections Go pumps (hijack.go)

	poolsMu sync.Mutex
	pools   map[*frontend.Pool]struct{} // the worker pools of apps not yet unloaded (workers.go)

	// In a worker process (relay.go): the VM's messages go to the front
	// end, and relayDone is closed once the VM stopped reading its socket.
	relayTo   func(*msg.Msg)
	relayDone chan struct{}
}

type reply struct {
	result uint64
	text   string
}

var (
	startMu sync.Mutex
	running *Runtime
)

// Current is the process's VM, or nil before it started.
func Current() *Runtime {
	startMu.Lock()
	defer startMu.Unlock()
	return running
}

// Serving reports whether an app has loaded and not been closed since,
// and in cluster mode whether each app's pool has a worker that takes
// requests (not all of them restarting, stopped or frozen).
func (rt *Runtime) Serving() bool {
	if rt.apps.Load() == 0 {
		return false
	}
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	for p := range rt.pools {
		if !p.Serving() {
			return false
		}
	}
	return true
}

// RubyVersion is the version of the libruby this binary runs.
func RubyVersion() string { return ruby.RubyVersion() }

// RubyPlatform is the platform the libruby loaded was built for.
func RubyPlatform() string { return ruby.RubyPlatform() }

// BuiltABI is the Ruby ABI this binary was compiled for: "3.1.0 x86_64-linux-gnu".
func BuiltABI() string { return ruby.BuiltABI() }

// Start makes the process's Runtime once and returns it. Its VM boots
// with the first app loaded in this process (not in cluster mode, whose
// apps run in worker processes).
func Start(o Options) (*Runtime, error) {
	startMu.Lock()
	defer startMu.Unlock()
	if running != nil {
		return running, nil
	}
	running = newRuntime(o, maxStreams)
	return running, nil
}

// newRuntime makes a runtime whose stream table has room for streams
// requests at once.
func newRuntime(o Options, streams int) *Runtime {
	if o.Program == "" {
		o.Program = "ruvoy"
	}
	if o.ResponseWindow <= 0 {
		o.ResponseWindow = defaultResponseWindow
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	rt := &Runtime{opts: o, streams: newStreams(streams), replies: make(chan reply, 1),
		pools: map[*frontend.Pool]struct{}{}, procs: tuning.NewProcs(o.ProcsByLoad)}
	// Go pumps a hijacked connection's bytes: more than a lone request's
	// work (internal/tuning's Procs).
	rt.pumps.OnPump = rt.procs.Busy
	rt.watch.VM = heldWatch{}
	rt.watch.OnHold = func() { rt.counters.holds.Add(1) }
	rt.watch.OnLimit = rt.exitHeld
	rt.logger.Store(o.Logger)
	rt.watch.Warn.Store(int64(tuning.DefaultHoldWarn))
	return rt
}

// bootLocal boots this process's VM, once.
func (rt *Runtime) bootLocal() error {
	rt.bootMu.Lock()
	defer rt.bootMu.Unlock()
	if rt.local.Load() {
		return nil
	}
	err := ruby.Start(vmConfig{
		Program:    rt.opts.Program,
		Args:       rt.opts.Args,
		RubyLib:    rubyLibrary(),
		MaxStreams: maxStreams,
		Window:     uint64(rt.opts.ResponseWindow),
	})
	if err != nil {
		return err
	}
	rt.local.Store(true)
	frontend.LocalVM() // its app waits for its own children
	ruby.DirectLimit(rt.directSlots())
	go rt.dispatch()
	go rt.watch.Run()
	rt.releaseWhenIdle()
	return nil
}

// releaseWhenIdle starts giving memory back once the process is idle
// (tuning.ReleaseWhenIdle): in a process with its own VM, in a worker, and
// in a cluster's front end, whose Go heap a burst grows as well.
func (rt *Runtime) releaseWhenIdle() {
	rt.release.Do(func() {
		go tuning.ReleaseWhenIdle(rt.activity, func() {
			ruby.ReleaseMemory()
			rt.counters.releases.Add(1)
		})
	})
}

// SetLogger replaces the logger the runtime writes to (a Caddy config
// reload brings a new one).
func (rt *Runtime) SetLogger(l *zap.Logger) {
	if l != nil {
		rt.logger.Store(l)
	}
}

func (rt *Runtime) log() *zap.Logger { return rt.logger.Load() }

// control sends a control message and waits for the VM's reply.
func (rt *Runtime) control(kind uint32, aux uint64, payload []byte) reply {
	return rt.controlFlags(kind, 0, aux, payload)
}

// controlFlags is control with flags.
func (rt *Runtime) controlFlags(kind, flags uint32, aux uint64, payload []byte) reply {
	rt.controlMu.Lock()
	defer rt.controlMu.Unlock()
	ruby.Submit(kind, 0, flags, aux, payload)
	return <-rt.replies
}

// Load builds the Rack app in rackup (a config.ru) and returns it. A boot
// error comes back with Ruby's message and backtrace.
func (rt *Runtime) Load(rackup, environment string, o AppOptions) (*App, error) {
	var upstreams string
	if o.Upstream != nil {
		upstreams = strings.Join(o.Upstream.Upstreams, ",")
	}
	dirs, err := openSendfileDirs(o.SendfileDirs)
	if err != nil {
		return nil, fmt.Errorf("ruvoy: a sendfile directory: %w", err)
	}
	if o.Workers > 0 {
		p, err := rt.startPool(o, rackup, environment, upstreams)
		if err != nil {
			closeSendfileDirs(dirs)
			return nil, err
		}
		rt.apps.Add(1)
		a := newApp(rt, 0, o, dirs)
		a.pool = p
		return a, nil
	}
	if err := rt.bootLocal(); err != nil {
		closeSendfileDirs(dirs)
		return nil, fmt.Errorf("ruvoy: starting Ruby: %w", err)
	}
	payload := wire.AppendLoadApp(nil, rackup, environment, upstreams)
	r := rt.control(wire.InLoadApp, 0, payload)
	if r.result == 0 {
		closeSendfileDirs(dirs)
		return nil, rt.bootFailed(rackup, r.text)
	}
	// One process is its own worker: its boot hooks run before it serves.
	if text, ok := rt.WorkerBoot(0); !ok {
		rt.control(wire.InUnloadApp, r.result, nil)
		closeSendfileDirs(dirs)
		return nil, rt.bootFailed(rackup, text)
	}
	rt.apps.Add(1)
	return newApp(rt, r.result, o, dirs), nil
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

// Shutdown stops the VM once the servers have drained (the grace period
// is over): requests still in Ruby get Ruvoy::Shutdown raised where they
// are, and up to unwindWait to end; then the event loop ends and the VM is
// cleaned up (at_exit hooks run), for up to cleanupWait. Whatever Ruby is
// doing, it returns within those: with 0 when no request was cut short and
// the VM stopped cleanly, else ExitCutShort (requests cut short),
// ExitVMHeld (the VM thread did not stop: its hooks never ran), or
// ruby_cleanup's own status.
func (rt *Runtime) Shutdown() int {
	rt.stopOnce.Do(func() {
		rt.closeHijacked()
		done := make(chan int, 1)
		go func() { done <- rt.stopPools() }()
		if rt.local.Load() {
			rt.exitCode = rt.shutdown()
		}
		rt.exitCode = max(rt.exitCode, <-done)
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

// Exit statuses of a stop that did not end cleanly (docs/cli.md).
const (
	ExitCutShort = 3 // requests were still running when the grace period ended
	ExitVMHeld   = 4 // the VM thread was held and could not be stopped
)

const (
	settleWait  = time.Second
	unwindWait  = 3 * time.Second
	cleanupWait = 5 * time.Second
)

// cutShort raises Ruvoy::Shutdown in the requests still running and
// waits for them to unwind; it returns ExitCutShort if there were any
// (code: what an earlier call returned). The servers have drained, so
// every handler has returned; a request whose answer went out may still
// be ending in Ruby (closing its body, after-reply hooks): such requests
// get settleWait to end by themselves first (a stop right after an answer
// was sometimes counted as cutting it short).
func (rt *Runtime) cutShort(code int) int {
	for deadline := time.Now().Add(settleWait); rt.localStats().Requests > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	n := rt.localStats().Requests
	if n == 0 {
		return code
	}
	if code == 0 {
		rt.stop.cut.Store(int64(max(n, rt.streams.inUse()))) // and those waiting for the VM thread
		rt.log().Warn("ruvoy: requests still running after the grace period: raising Ruvoy::Shutdown in them", zap.Int("requests", n))
	}
	ruby.Interrupt(0, wire.IntrShutdown)
	for deadline := time.Now().Add(unwindWait); rt.localStats().Requests > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return ExitCutShort
}

func (rt *Runtime) shutdown() int {
	code := rt.cutShort(0)
	if rt.relayDone != nil {
		// A worker's VM thread reads what the front end sent before the
		// stop once Ruby code lets it go: those requests start, and are
		// cut short the same way.
		select {
		case <-rt.relayDone:
		case <-time.After(unwindWait):
		}
		code = rt.cutShort(code)
	}
	ruby.Submit(wire.InStop, 0, 0, 0, nil)
	joined := make(chan int, 1)
	go func() { joined <- ruby.Join() }()
	select {
	case status := <-joined:
		rt.drainInbox(time.Second)
		if status != 0 {
			return status
		}
		return code
	case <-time.After(cleanupWait):
	}
	s := rt.localStats()
	fields := []zap.Field{zap.Duration("held", s.HeldFor.Round(time.Millisecond))}
	if method, path, ok := rt.streams.describe(s.HeldStream); ok {
		fields = append(fields, zap.String("method", method), zap.String("path", path))
	}
	rt.log().Error("ruvoy: the VM thread did not stop: exiting without the app's at_exit hooks", fields...)
	return ExitVMHeld
}
