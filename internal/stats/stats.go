// Package stats is a VM's figures in one shape, from the C thread that
// keeps them (vm.h's rv_vm_stats, read by internal/vm) through a worker's
// report to its front end (wire.h's WorkerStats frame) to the metrics.
package stats

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// VM is what a VM thread reports about itself at a moment, and what its
// process adds: the hold detector's count and its resident memory.
type VM struct {
	Busy           time.Duration // time spent outside the event loop's wait, to now
	LoopLag        time.Duration // lateness of the loop's 250 ms tick, or how long it has been held
	HeldFor        time.Duration // how long Ruby code has held the thread; 0 if the loop has it
	HeldStream     uint64        // the request whose fiber runs, if any
	Requests       int           // request fibers alive
	Fibers         int           // other fibers the scheduler runs
	ResponseBytes  int64         // response bytes sent to Go, not yet written to clients
	GCCount        uint64
	GCTime         time.Duration
	HeapLiveSlots  uint64
	OffloadBusy    int           // offload threads running a block
	OffloadWaiting int           // callers waiting for an offload thread
	Hijacked       int           // hijacked connections the app holds open
	IdleGCs        uint64        // GC steps run between requests (--gc-when-idle)
	IdleGCTime     time.Duration // their time
	IdleGCLongest  time.Duration // the longest: what a request that came meanwhile may have waited
	Holds          int64         // the VM thread held past the hold warning, so far
	RSS            uint64        // the process's resident memory, bytes (a worker's report)
}

// Sum is the figures of a server of several VMs: counts and times add
// up, LoopLag and IdleGCLongest are the worst, and HeldFor the shortest,
// since the server is held only while every VM is.
func Sum(vms []VM) VM {
	if len(vms) == 0 {
		return VM{}
	}
	v := vms[0]
	for _, o := range vms[1:] {
		v.add(o)
	}
	return v
}

func (v *VM) add(o VM) {
	v.Busy += o.Busy
	v.LoopLag = max(v.LoopLag, o.LoopLag)
	if o.HeldFor < v.HeldFor {
		v.HeldFor, v.HeldStream = o.HeldFor, o.HeldStream
	}
	v.Requests += o.Requests
	v.Fibers += o.Fibers
	v.ResponseBytes += o.ResponseBytes
	v.GCCount += o.GCCount
	v.GCTime += o.GCTime
	v.HeapLiveSlots += o.HeapLiveSlots
	v.OffloadBusy += o.OffloadBusy
	v.OffloadWaiting += o.OffloadWaiting
	v.Hijacked += o.Hijacked
	v.IdleGCs += o.IdleGCs
	v.IdleGCTime += o.IdleGCTime
	v.IdleGCLongest = max(v.IdleGCLongest, o.IdleGCLongest)
	v.Holds += o.Holds
	v.RSS += o.RSS
}

// Append appends the figures as a wire.WorkerStats payload.
func (v VM) Append(b []byte) []byte {
	return wire.AppendStats(b, [wire.WorkerStatsCount]uint64{
		uint64(v.Busy), uint64(v.LoopLag), uint64(v.HeldFor), v.HeldStream,
		uint64(v.Requests), uint64(v.Fibers), uint64(v.ResponseBytes),
		v.GCCount, uint64(v.GCTime), v.HeapLiveSlots,
		uint64(v.OffloadBusy), uint64(v.OffloadWaiting), uint64(v.Hijacked),
		v.IdleGCs, uint64(v.IdleGCTime), uint64(v.IdleGCLongest), uint64(v.Holds), v.RSS,
	})
}

// Read reads what Append laid out.
func Read(p []byte) (VM, bool) {
	f, ok := wire.ReadStats(p)
	if !ok {
		return VM{}, false
	}
	return VM{
		Busy: time.Duration(f[0]), LoopLag: time.Duration(f[1]), HeldFor: time.Duration(f[2]), HeldStream: f[3],
		Requests: int(f[4]), Fibers: int(f[5]), ResponseBytes: int64(f[6]),
		GCCount: f[7], GCTime: time.Duration(f[8]), HeapLiveSlots: f[9],
		OffloadBusy: int(f[10]), OffloadWaiting: int(f[11]), Hijacked: int(f[12]),
		IdleGCs: f[13], IdleGCTime: time.Duration(f[14]), IdleGCLongest: time.Duration(f[15]), Holds: int64(f[16]), RSS: f[17],
	}, true
}
