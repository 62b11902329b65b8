package serve

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
	"github.com/ruvoy/ruvoy/internal/stats"
)

// Stats reads the figures of the process's VM, and of its workers as they
// last reported them (cluster mode), summed (stats.Sum).
func (rt *Runtime) Stats() stats.VM {
	var vms []stats.VM
	if rt.vm.Booted() {
		vms = append(vms, rt.vm.Stats())
	}
	rt.eachWorker(func(_ int, w *frontend.Handle, _ int64) {
		if w == nil {
			return
		}
		if s := w.Stats(); s != nil {
			vms = append(vms, *s)
		}
	})
	return stats.Sum(vms)
}

// Figures is what the runtime counts, at a moment: what the metrics
// report (internal/metrics).
type Figures struct {
	Admitted, Direct     int64 // requests admitted to Ruby; of them, answered on their handler's thread
	RejectedMaxRequests  int64 // answered 503 before Ruby: no place
	RejectedQueueTimeout int64 // no place within the queue timeout
	RejectedPerClient    int64 // their client held its share
	RejectedBodyBudget   int64 // no room for their body
	InFlight             int   // requests holding a place in Ruby
	Orphans              int64 // of them, whose client left
	Queued, QueuedOnConn int64 // waiting for a place; for one of their connection's
	QueueWait            time.Duration
	BodyHeld             int64     // request body bytes read and not yet taken
	WriteCuts            int64     // responses cut for the write timeout
	ProcsChanges         int64     // times Go's processors followed the load
	Releases             int64     // idle spells after which memory was given back
	QueueTime            Histogram // from a head's arrival to the app's call
	VM                   stats.VM
	Workers              []WorkerFigures // cluster mode: by slot
	Serving              int             // cluster mode: workers serving
}

// WorkerFigures is one worker slot's, summed over the pools that have it
// (apps, and the old and new app across a reload).
type WorkerFigures struct {
	InFlight, Restarts int64
	Up                 bool          // a worker serves the slot (not one restarting)
	Held               bool          // Ruby code holds its VM thread
	HeldFor            time.Duration // for this long (the longest over the pools)
	Silence            time.Duration // since it last reported (the longest)
	RSS                uint64
	Busy               time.Duration
	QueueTime          Histogram // its requests'
}

// Figures reads what the runtime counts.
func (rt *Runtime) Figures() Figures {
	c := &rt.counters
	f := Figures{
		Admitted: c.admitted.Load(), Direct: c.direct.Load(),
		RejectedMaxRequests: c.rejectedCount.Load(), RejectedQueueTimeout: c.rejectedQueue.Load(),
		RejectedPerClient: c.rejectedClient.Load(), RejectedBodyBudget: c.rejectedBody.Load(),
		InFlight: rt.streams.inUse(), Orphans: c.orphans.Load(),
		Queued: c.queued.Load(), QueuedOnConn: c.connQueued.Load(), QueueWait: time.Duration(c.queueWaitNs.Load()),
		BodyHeld: c.bodyHeld.Load(), WriteCuts: rt.writeCuts.total.Load(), ProcsChanges: rt.procs.Changes(),
		Releases: c.releases.Load(), QueueTime: rt.queueTimes.all.read(), VM: rt.Stats(),
	}
	rt.eachWorker(func(i int, w *frontend.Handle, restarts int64) {
		for i >= len(f.Workers) {
			f.Workers = append(f.Workers, WorkerFigures{})
		}
		s := &f.Workers[i]
		s.Restarts += restarts
		if s.QueueTime.Counts == nil {
			s.QueueTime = rt.queueTimes.slot(i)
		}
		if w == nil {
			return
		}
		f.Serving++
		s.Up = true
		s.InFlight += w.InFlight()
		s.Held = s.Held || w.Held()
		s.HeldFor = max(s.HeldFor, w.HeldFor())
		s.Silence = max(s.Silence, w.Silence())
		if r := w.Stats(); r != nil {
			s.RSS += r.RSS
			s.Busy += r.Busy
		}
	})
	return f
}
