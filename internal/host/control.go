package host

import "github.com/ruvoy/ruvoy/internal/wire"

// Control messages: Go asks, the VM answers (RV_OUT_REPLY), one exchange
// at a time.

type reply struct {
	result uint64
	text   string
}

// control sends a control message and waits for the VM's reply.
func (v *VM) control(kind, flags uint32, aux uint64, payload []byte) reply {
	v.controlMu.Lock()
	defer v.controlMu.Unlock()
	ruby.Submit(kind, 0, flags, aux, payload)
	return <-v.replies
}

// LoadApp builds the Rack app in rackup in the VM and returns the VM's
// number for it; 0 and Ruby's error, with its backtrace, when it failed.
func (v *VM) LoadApp(rackup, environment, upstreams string) (uint64, string) {
	r := v.control(wire.InLoadApp, 0, 0, wire.AppendLoadApp(nil, rackup, environment, upstreams))
	return r.result, r.text
}

// UnloadApp drops an app LoadApp built.
func (v *VM) UnloadApp(app uint64) { v.control(wire.InUnloadApp, 0, app, nil) }

// WorkerBoot runs the app's Ruvoy.on_worker_boot blocks (lib/ruvoy/hooks.rb),
// given the worker's index (0 in one process), before the process serves;
// false and what a block raised, with its backtrace, when one raised: the
// boot failed. The shutdown blocks run as the VM stops (Stop), the
// before_fork ones in a template (--preload).
func (v *VM) WorkerBoot(index int) (string, bool) {
	r := v.control(wire.InHooks, uint32(index), wire.HooksWorkerBoot, nil)
	return r.text, r.result != 0
}
