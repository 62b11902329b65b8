package ruvoy

import (
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A worker process's runtime (internal/cluster/worker): one app, whose VM
// reads the front end's socket itself once the app has loaded, and every
// message the VM sends Go (but the answers to Go's own control messages)
// goes on to the front end.

// NewRelay makes a worker process's runtime: relay gets what the VM
// sends Go, to send it on to the front end.
func NewRelay(o Options, relay func(*msg.Msg)) *Runtime {
	// The front end keeps the streams of a worker's requests; a table of
	// 65,536 (0.8 MiB) would sit unused here.
	rt := newRuntime(o, 1)
	rt.relayTo = relay
	rt.relayDone = make(chan struct{})
	return rt
}

// Boot boots the VM.
func (rt *Runtime) Boot() error { return rt.bootLocal() }

// LoadApp builds the app in rackup in the VM and returns the VM's number
// for it; 0 and Ruby's error when it failed to load.
func (rt *Runtime) LoadApp(rackup, environment, upstreams string) (uint64, string) {
	r := rt.control(wire.InLoadApp, 0, wire.AppendLoadApp(nil, rackup, environment, upstreams))
	return r.result, r.text
}

// Relay hands the VM thread the socket to the front end (fd), whose
// frames it reads from then on for app; early are frames already read.
func (rt *Runtime) Relay(app uint64, fd int, early []byte) (string, bool) {
	r := rt.controlFlags(wire.InRelay, uint32(app), uint64(fd), early)
	return r.text, r.result != 0
}

// RelayEnded says the VM stopped reading the front end's socket: a stop
// need not wait for the frames it read before the stop.
func (rt *Runtime) RelayEnded() { close(rt.relayDone) }

// Holds is how often the hold detector found the VM thread held past the
// hold warning.
func (rt *Runtime) Holds() int64 { return rt.counters.holds.Load() }
