package host

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

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

// Stop stops the VM once the servers have drained (the grace period is
// over): requests still in Ruby get Ruvoy::Shutdown raised where they
// are, and up to unwindWait to end; then the event loop ends, the app's
// on_worker_shutdown blocks run and the VM is cleaned up (at_exit hooks
// run), for up to cleanupWait. Whatever Ruby is doing, it returns within
// those: the process's exit status (0 when no request was cut short and
// the VM stopped cleanly, else ExitCutShort, ExitVMHeld, or ruby_cleanup's
// own status) and how many requests it cut short. Once only; a VM never
// booted stops at once.
func (v *VM) Stop() (code, cut int) {
	v.stopOnce.Do(func() {
		if v.Booted() {
			v.stopCode, cut = v.stop()
		}
	})
	return v.stopCode, cut
}

func (v *VM) stop() (int, int) {
	code, cut := v.cutShort(0)
	if v.relayDone != nil {
		// A worker's VM thread reads what the front end sent before the
		// stop once Ruby code lets it go: those requests start, and are
		// cut short the same way.
		select {
		case <-v.relayDone:
		case <-time.After(unwindWait):
		}
		var more int
		code, more = v.cutShort(code)
		cut = max(cut, more)
	}
	ruby.Submit(wire.InStop, 0, 0, 0, nil)
	joined := make(chan int, 1)
	go func() { joined <- ruby.Join() }()
	select {
	case status := <-joined:
		v.drain(time.Second)
		if status != 0 {
			return status, cut
		}
		return code, cut
	case <-time.After(cleanupWait):
	}
	v.Log().Error("ruvoy: the VM thread did not stop: exiting without the app's at_exit hooks", v.heldFields(v.Stats().HeldFor)...)
	return ExitVMHeld, cut
}

// cutShort raises Ruvoy::Shutdown in the requests still running and
// waits for them to unwind; it returns ExitCutShort if there were any
// (code: what an earlier call returned), and how many. Every handler has
// returned; a request whose answer went out may still be ending in Ruby
// (closing its body, after-reply hooks): such requests get settleWait to
// end by themselves first (a stop right after an answer was sometimes
// counted as cutting it short).
func (v *VM) cutShort(code int) (int, int) {
	running := func() int { return ruby.ReadStats().Requests }
	for deadline := time.Now().Add(settleWait); running() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	n := running()
	if n == 0 {
		return code, 0
	}
	if code == 0 {
		v.Log().Warn("ruvoy: requests still running after the grace period: raising Ruvoy::Shutdown in them", zap.Int("requests", n))
	}
	ruby.Interrupt(0, wire.IntrShutdown)
	for deadline := time.Now().Add(unwindWait); running() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return ExitCutShort, n
}
