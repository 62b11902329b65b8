package ruvoy

import (
	"runtime"
	"strconv"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/cluster/frontend"

	"github.com/prometheus/client_golang/prometheus"
)

// VMStats is what the VM thread last reported about itself.
type VMStats struct {
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
	OffloadBusy    int // offload threads running a block
	OffloadWaiting int // callers waiting for an offload thread
	Hijacked       int // hijacked connections the app holds open
}

// Stats reads the figures of the process's VM, and of its workers as they
// last reported them (cluster mode): counts and times add up, LoopLag is
// the worst; HeldFor is the shortest hold among the VMs, since the
// server is held only while every one of them is.
func (rt *Runtime) Stats() VMStats {
	var v VMStats
	n := 0
	if rt.local.Load() {
		v, n = rt.localStats(), 1
	}
	for _, s := range rt.workerStats() {
		if n == 0 {
			v = fromWorker(s)
		} else {
			v.Busy += s.Busy
			v.LoopLag = max(v.LoopLag, s.LoopLag)
			if s.HeldFor < v.HeldFor {
				v.HeldFor, v.HeldStream = s.HeldFor, s.HeldStream
			}
			v.Requests += s.Requests
			v.Fibers += s.Fibers
			v.ResponseBytes += s.ResponseBytes
			v.GCCount += s.GCCount
			v.GCTime += s.GCTime
			v.HeapLiveSlots += s.HeapLiveSlots
			v.OffloadBusy += s.OffloadBusy
			v.OffloadWaiting += s.OffloadWaiting
			v.Hijacked += s.Hijacked
		}
		n++
	}
	return v
}

// localStats reads this process's VM's figures without stopping it.
func (rt *Runtime) localStats() VMStats {
	if !rt.local.Load() {
		return VMStats{}
	}
	s := ruby.ReadStats()
	v := VMStats{
		Busy:           time.Duration(s.BusyNS),
		LoopLag:        time.Duration(s.LagNS),
		HeldStream:     s.HeldStream,
		Requests:       int(s.Requests),
		Fibers:         int(s.Fibers),
		ResponseBytes:  int64(s.ResponseBytes),
		GCCount:        s.GCCount,
		GCTime:         time.Duration(s.GCTimeNS),
		HeapLiveSlots:  s.HeapLiveSlots,
		OffloadBusy:    int(int64(s.OffloadBusy)),
		OffloadWaiting: int(int64(s.OffloadWaiting)),
		Hijacked:       int(s.Hijacked),
	}
	now := ruby.Now()
	if since := s.HeldSince; since != 0 && now > since {
		v.HeldFor = time.Duration(now - since)
	}
	// While Ruby code holds the thread the loop neither ticks nor sleeps:
	// the figures it would have made are made here, so that the gauges
	// show the hold as it happens.
	if since := s.AwakeSince; since != 0 && now > since {
		v.Busy += time.Duration(now - since)
	}
	v.LoopLag = max(v.LoopLag, v.HeldFor)
	return v
}

// Collector reports the runtime's metrics (Prometheus), for Caddy's /metrics.
func (rt *Runtime) Collector() prometheus.Collector { return (*collector)(rt) }

type collector Runtime

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(rt *Runtime, s *VMStats) float64
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("ruvoy_"+name, help, labels, nil)
}

var (
	rejectedDesc = desc("requests_rejected_total", "Requests answered 503 before reaching Ruby, by reason.", "reason")
	metrics      = []metric{
		{desc("requests_admitted_total", "Requests admitted to Ruby."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.admitted.Load()) }},
		{desc("requests_direct_total", "Requests whose handler waited for the VM's answer on its own thread, as it does when requests come one at a time."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.direct.Load()) }},
		{desc("go_processors", "Go's processors (GOMAXPROCS): 1 while requests come one at a time, when they follow the load (RUVOY_PROCS_BY_LOAD)."), prometheus.GaugeValue,
			func(*Runtime, *VMStats) float64 { return float64(runtime.GOMAXPROCS(0)) }},
		{desc("go_processors_changes_total", "Times Go's processors were lowered to 1 or given back as the load changed."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.procs.Changes()) }},
		{desc("requests_in_flight", "Requests holding a place in Ruby (their client may have left)."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.streams.inUse()) }},
		{desc("requests_orphaned", "Requests whose client left (reset, closed) while Ruby still unwinds them; they hold no place."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.orphans.Load()) }},
		{desc("hijacked_connections", "Connections apps took over (rack.hijack, WebSocket upgrades) and still hold."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.Hijacked) }},
		{desc("requests_queued", "Requests waiting for a place (queue timeout)."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.queued.Load()) }},
		{desc("requests_queued_on_connection", "HTTP/2 and HTTP/3 requests waiting for one of their connection's places (max-requests-per-connection)."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.connQueued.Load()) }},
		{desc("responses_cut_write_timeout_total", "Responses cut because their client took none of them for the write timeout (--write-timeout)."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.writeCuts.total.Load()) }},
		{desc("queue_wait_seconds_total", "Time admitted requests spent waiting for a place."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return time.Duration(rt.counters.queueWaitNs.Load()).Seconds() }},
		{desc("request_body_bytes_held", "Request body bytes read from clients and not yet taken by apps."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.bodyHeld.Load()) }},
		{desc("response_body_bytes_in_flight", "Response bytes the VM produced that clients have not taken yet."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.ResponseBytes) }},
		{desc("vm_busy_seconds_total", "Time the VM thread spent working (rate() of it is the busy ratio)."), prometheus.CounterValue,
			func(_ *Runtime, s *VMStats) float64 { return s.Busy.Seconds() }},
		{desc("vm_loop_lag_seconds", "How late the event loop's last periodic tick ran, or how long Ruby code has held the VM thread while it does."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return s.LoopLag.Seconds() }},
		{desc("vm_holds_total", "Times Ruby code held the VM thread past the hold warning (--hold-warn)."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.holds()) }},
		// Its name before; kept for a release (docs/overload.md).
		{desc("vm_stalls_total", "Deprecated: ruvoy_vm_holds_total, under its former name."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.holds()) }},
		{desc("fibers_requests", "Request fibers alive."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.Requests) }},
		{desc("fibers_scheduled", "Fibers started with Fiber.schedule, alive."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.Fibers) }},
		{desc("offload_threads_busy", "Offload threads running a block."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.OffloadBusy) }},
		{desc("offload_callers_waiting", "Callers waiting for an offload thread."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.OffloadWaiting) }},
		{desc("memory_releases_total", "Idle spells after which this process gave the kernel back malloc's free pages and Go's idle heap (2 s without a request)."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.releases.Load()) }},
		{desc("ruby_gc_total", "Ruby garbage collections."), prometheus.CounterValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.GCCount) }},
		{desc("ruby_gc_seconds_total", "Time Ruby spent collecting garbage."), prometheus.CounterValue,
			func(_ *Runtime, s *VMStats) float64 { return s.GCTime.Seconds() }},
		{desc("ruby_heap_live_slots", "Live object slots in Ruby's heap."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.HeapLiveSlots) }},
	}
)

// Cluster mode: each worker's own series, labelled by its slot (0 to
// workers-1); a slot's replacements keep its label.
var (
	workerInFlightDesc = desc("worker_requests_in_flight", "Requests a worker runs.", "worker")
	workerHeldDesc     = desc("worker_held", "1 while Ruby code holds the worker's VM thread (it gets no new requests).", "worker")
	workerRSSDesc      = desc("worker_rss_bytes", "A worker's resident memory.", "worker")
	workerBusyDesc     = desc("worker_vm_busy_seconds_total", "Time a worker's VM thread spent working (resets when the worker is replaced).", "worker")
	workerRestartsDesc = desc("worker_restarts_total", "Workers started again in a slot after one died.", "worker")
	workersDesc        = desc("workers", "Worker processes serving.")
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rejectedDesc
	for _, m := range metrics {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{workerInFlightDesc, workerHeldDesc, workerRSSDesc, workerBusyDesc, workerRestartsDesc, workersDesc} {
		ch <- d
	}
}

// slotFigures is one worker slot's series, summed over the pools that
// have it (apps, and the old and new app across a reload).
type slotFigures struct {
	inFlight, held, rss, busy, restarts float64
}

func (rt *Runtime) collectWorkers(ch chan<- prometheus.Metric) {
	var slots []slotFigures
	serving := 0
	rt.eachWorker(func(i int, w *frontend.Worker, restarts int64) {
		for i >= len(slots) {
			slots = append(slots, slotFigures{})
		}
		f := &slots[i]
		f.restarts += float64(restarts)
		if w == nil {
			return
		}
		serving++
		f.inFlight += float64(w.InFlight())
		if w.Held() {
			f.held = 1
		}
		if s := w.Stats(); s != nil {
			f.rss += float64(s.RSS)
			f.busy += s.Busy.Seconds()
		}
	})
	if slots == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(serving))
	for i, f := range slots {
		label := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(workerInFlightDesc, prometheus.GaugeValue, f.inFlight, label)
		ch <- prometheus.MustNewConstMetric(workerHeldDesc, prometheus.GaugeValue, f.held, label)
		ch <- prometheus.MustNewConstMetric(workerRSSDesc, prometheus.GaugeValue, f.rss, label)
		ch <- prometheus.MustNewConstMetric(workerBusyDesc, prometheus.CounterValue, f.busy, label)
		ch <- prometheus.MustNewConstMetric(workerRestartsDesc, prometheus.CounterValue, f.restarts, label)
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	rt := (*Runtime)(c)
	s := rt.Stats()
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedCount.Load()), "max_requests")
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedQueue.Load()), "queue_timeout")
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedClient.Load()), "max_requests_per_client")
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedBody.Load()), "body_budget")
	for _, m := range metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(rt, &s))
	}
	rt.collectWorkers(ch)
}

// holds is how often Ruby code held a VM thread past the hold warning:
// this process's, and its workers' as they last reported.
func (rt *Runtime) holds() int64 {
	n := rt.counters.holds.Load()
	for _, w := range rt.workerStats() {
		n += w.Holds
	}
	return n
}

// fromWorker is a worker's VM figures, as it reported them.
func fromWorker(s cluster.Stats) VMStats {
	return VMStats{Busy: s.Busy, LoopLag: s.LoopLag, HeldFor: s.HeldFor, HeldStream: s.HeldStream,
		Requests: s.Requests, Fibers: s.Fibers, ResponseBytes: s.ResponseBytes,
		GCCount: s.GCCount, GCTime: s.GCTime, HeapLiveSlots: s.HeapLiveSlots,
		OffloadBusy: s.OffloadBusy, OffloadWaiting: s.OffloadWaiting, Hijacked: s.Hijacked}
}

// workerStats is what each serving worker last reported.
func (rt *Runtime) workerStats() []cluster.Stats {
	var out []cluster.Stats
	rt.eachWorker(func(_ int, w *frontend.Worker, _ int64) {
		if w == nil {
			return
		}
		if s := w.Stats(); s != nil {
			out = append(out, *s)
		}
	})
	return out
}
