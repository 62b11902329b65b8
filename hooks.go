package ruvoy

import "github.com/ruvoy/ruvoy/internal/wire"

// WorkerBoot runs the app's Ruvoy.on_worker_boot blocks (lib/ruvoy/hooks.rb)
// in this process's VM, given the worker's index (0 in one process),
// before the process serves; false and what a block raised, with its
// backtrace, when one raised: the boot failed. The shutdown blocks run as
// the VM stops (Shutdown), the before_fork ones in a template (--preload).
func (rt *Runtime) WorkerBoot(index int) (string, bool) {
	r := rt.controlFlags(wire.InHooks, uint32(index), wire.HooksWorkerBoot, nil)
	return r.text, r.result != 0
}
