package host

import (
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A worker process's VM (internal/cluster/worker): once its app has
// loaded, the VM thread reads the front end's socket itself and writes
// what it sends as frames (internal/vm's rv_relay.c); Go keeps its own
// frames (settings, boot result, figures) and the urgent socket.

// RelayOpen names the socket to the front end (fd), before the VM boots,
// so that Go's own frames can be sent on it (RelaySend).
func (v *VM) RelayOpen(fd int) {
	v.relayDone = make(chan struct{})
	ruby.RelayOpen(fd)
}

// Relay hands the VM thread the socket to the front end, whose frames it
// reads from then on for app; early are frames already read.
func (v *VM) Relay(app uint64, fd int, early []byte) (string, bool) {
	r := v.control(wire.InRelay, uint32(app), uint64(fd), early)
	return r.text, r.result != 0
}

// RelayEnded says the VM stopped reading the front end's socket: a stop
// need not wait for the frames it read before the stop.
func (v *VM) RelayEnded() { close(v.relayDone) }

// RelaySend sends the front end a frame of the worker's own (wire.h,
// "Workers"), RelaySendMsg one of the VM's messages, through the VM's
// batch; RelayFinish writes what is left, once the VM has stopped.
func (v *VM) RelaySend(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	ruby.RelaySend(kind, stream, flags, aux, payload)
}
func (v *VM) RelaySendMsg(m *msg.Msg) { ruby.RelaySendMsg(m) }
func (v *VM) RelayFinish()            { ruby.RelayFinish() }

// StartHeldReporter starts the worker's held reporter (rv_held.c): what the VM sends
// while Ruby code holds its thread goes out without waiting for the
// loop's turn. 0, or a negative errno.
func (v *VM) StartHeldReporter() int { return ruby.StartHeldReporter() }

// ForkedApp is the app a worker forked from a template (--preload) got
// loaded with its VM; 0 in any other process.
func (v *VM) ForkedApp() uint64 { return ruby.ForkedApp() }

// RelayActivity is what the idle release looks at in a worker: the
// requests the VM read from the front end so far, and whether any is
// under way.
func (v *VM) RelayActivity() (int64, bool) {
	admitted, inflight := ruby.RelayCounts()
	return int64(admitted), inflight > 0
}
