// Package host drives the process's one Ruby VM: it boots it, exchanges
// control messages with it (loading apps, running their hooks), takes
// what it sends (the dispatcher, and a lone request's direct line),
// watches for Ruby code that holds its thread, and stops it. It knows no
// request: what the VM sends about requests goes to a Router (the
// request path, internal/serve; in a worker, the relay to the front end).
// Its one way to the VM is a port: CRuby through internal/vm, or a
// stand-in in Go for the unit tests (-tags standin).
package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"
	"github.com/ruvoy/ruvoy/lib"

	"go.uber.org/zap"
)

// Config is what the VM boots with, beyond the embedded Ruby library.
type Config struct {
	Program        string   // $0 for the app (default "ruvoy")
	Args           []string // ARGV for the app
	ResponseWindow int      // response bytes in flight per request (default 256 KiB)
	MaxStreams     uint32   // requests the VM keeps room for (default MaxStreams)
	Logger         *zap.Logger
}

const (
	// DefaultResponseWindow is the response bytes in flight per request
	// unless configured.
	DefaultResponseWindow = 256 << 10
	// MaxStreams is the request path's stream table's size: every
	// request in Ruby has a stream.
	MaxStreams = 1 << 16
)

// A Router takes what the VM sends about requests (all but the answers
// to control messages): a chain of messages (msg.Msg.Next), and names a
// request for a log line.
type Router interface {
	Route(m *msg.Msg)
	Describe(stream uint64) (method, path string, ok bool)
}

// VM is the process's Ruby VM, booted once.
type VM struct {
	cfg       Config
	router    Router
	bootMu    sync.Mutex
	booted    atomic.Bool
	logger    atomic.Pointer[zap.Logger]
	controlMu sync.Mutex // one control exchange at a time
	replies   chan reply
	holdDet   detector     // the hold detector (detector.go)
	holds     atomic.Int64 // the VM thread held past the hold warning, so far

	dispatching atomic.Bool // the dispatcher may hold messages it took (drain)
	stopOnce    sync.Once
	stopCode    int

	// In a worker (relay.go): closed once the VM stopped reading the
	// front end's socket.
	relayDone chan struct{}
}

// New makes the process's VM, not yet booted; router takes what it sends.
func New(c Config, router Router) *VM {
	if c.Program == "" {
		c.Program = "ruvoy"
	}
	if c.ResponseWindow <= 0 {
		c.ResponseWindow = DefaultResponseWindow
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = MaxStreams
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	v := &VM{cfg: c, router: router, replies: make(chan reply, 1)}
	v.logger.Store(c.Logger)
	v.holdDet.VM = portHeld{}
	v.holdDet.OnHold = func() { v.holds.Add(1) }
	v.holdDet.OnLimit = v.exitHeld
	v.holdDet.Warn.Store(int64(DefaultHoldWarn))
	return v
}

// Boot boots the VM, once.
func (v *VM) Boot() error {
	v.bootMu.Lock()
	defer v.bootMu.Unlock()
	if v.booted.Load() {
		return nil
	}
	if err := ruby.Start(v.vmConfig(uint64(v.cfg.ResponseWindow))); err != nil {
		return err
	}
	v.booted.Store(true)
	ruby.DirectLimit(v.directLines())
	go v.dispatch()
	go v.holdDet.run()
	return nil
}

// Booted says whether the VM runs.
func (v *VM) Booted() bool { return v != nil && v.booted.Load() }

// vmConfig is what this VM, or a template's, boots with (window: the
// response window per request).
func (v *VM) vmConfig(window uint64) wire.VMConfig {
	return wire.VMConfig{Program: v.cfg.Program, Args: v.cfg.Args, RubyLib: lib.Ruby(), MaxStreams: v.cfg.MaxStreams, Window: window}
}

// TemplateSettings is what a template process boots (--preload): this
// VM's settings, with window, and the app it loads.
func (v *VM) TemplateSettings(window int, rackup, environment, upstreams string) []byte {
	return wire.AppendTemplateSettings(nil, wire.TemplateSettings{VMConfig: v.vmConfig(uint64(window)),
		Rackup: rackup, Environment: environment, Upstreams: upstreams})
}

// Program and Args are the app's $0 and ARGV.
func (v *VM) Program() string { return v.cfg.Program }
func (v *VM) Args() []string  { return v.cfg.Args }

// ResponseWindow is the response bytes in flight per request.
func (v *VM) ResponseWindow() int { return v.cfg.ResponseWindow }

// SetLogger replaces the logger the VM writes to (a Caddy config reload
// brings a new one).
func (v *VM) SetLogger(l *zap.Logger) {
	if l != nil {
		v.logger.Store(l)
	}
}

// Log is the logger the VM writes to.
func (v *VM) Log() *zap.Logger { return v.logger.Load() }

// Stats reads the VM's figures without stopping it (none before it
// booted), with the hold detector's count.
func (v *VM) Stats() stats.VM {
	if !v.Booted() {
		return stats.VM{}
	}
	s := ruby.ReadStats()
	s.Holds = v.holds.Load()
	return s
}

// Submit, Cancel and Interrupt send the VM a message (wire.h), cancel a
// request, or raise in one (wire.Intr*; stream 0: every one).
func (v *VM) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	ruby.Submit(kind, stream, flags, aux, payload)
}
func (v *VM) Cancel(stream uint64, flags uint32)     { ruby.Cancel(stream, flags) }
func (v *VM) Interrupt(stream uint64, reason uint32) { ruby.Interrupt(stream, reason) }

// SetGCWhenIdle has the VM run Ruby's GC once no request has been in
// flight for d (0: never; internal/vm's rv_gc_idle.c).
func (v *VM) SetGCWhenIdle(d time.Duration) { ruby.GCWhenIdle(d) }

// ReleaseMemory gives the kernel back malloc's free pages: any process may,
// with a VM or without.
func ReleaseMemory() { ruby.ReleaseMemory() }

// RubyVersion is the version of the libruby this binary runs.
func RubyVersion() string { return ruby.RubyVersion() }

// RubyPlatform is the platform the libruby loaded was built for.
func RubyPlatform() string { return ruby.RubyPlatform() }

// BuiltABI is the Ruby ABI this binary was compiled for: "3.1.0 x86_64-linux-gnu".
func BuiltABI() string { return ruby.BuiltABI() }
