package ruvoy

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/vm"

	"github.com/prometheus/client_golang/prometheus"
)

// VMStats is what the VM thread last reported about itself.
type VMStats struct {
	Busy           time.Duration // time spent outside the event loop's wait, to now
	LoopLag        time.Duration // lateness of the loop's 250 ms tick, or how long it has been held
	RunningFor     time.Duration // how long Ruby code has held the thread; 0 if the loop has it
	RunningStream  uint64        // the request whose fiber runs, if any
	Requests       int           // request fibers alive
	Fibers         int           // other fibers the scheduler runs
	ResponseBytes  int64         // response bytes sent to Go, not yet written to clients
	GCCount        uint64
	GCTime         time.Duration
	HeapLiveSlots  uint64
	OffloadBusy    int // offload threads running a block
	OffloadWaiting int // callers waiting for an offload thread
}

// Stats reads the VM's figures without stopping it.
func (rt *Runtime) Stats() VMStats {
	s := vm.ReadStats()
	v := VMStats{
		Busy:           time.Duration(s.BusyNS),
		LoopLag:        time.Duration(s.LagNS),
		RunningStream:  s.RunningStream,
		Requests:       int(s.Requests),
		Fibers:         int(s.Fibers),
		ResponseBytes:  int64(s.ResponseBytes),
		GCCount:        s.GCCount,
		GCTime:         time.Duration(s.GCTimeNS),
		HeapLiveSlots:  s.HeapLiveSlots,
		OffloadBusy:    int(int64(s.OffloadBusy)),
		OffloadWaiting: int(int64(s.OffloadWaiting)),
	}
	now := vm.Now()
	if since := s.RunningSince; since != 0 && now > since {
		v.RunningFor = time.Duration(now - since)
	}
	// While Ruby code holds the thread the loop neither ticks nor sleeps:
	// the figures it would have made are made here, so that the gauges
	// show the hold as it happens.
	if since := s.AwakeSince; since != 0 && now > since {
		v.Busy += time.Duration(now - since)
	}
	v.LoopLag = max(v.LoopLag, v.RunningFor)
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
		{desc("requests_in_flight", "Requests holding a place in Ruby (their client may have left)."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.streams.inUse()) }},
		{desc("requests_orphaned", "Requests whose client left (reset, closed) while Ruby still unwinds them; they hold no place."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.orphans.Load()) }},
		{desc("requests_queued", "Requests waiting for a place (queue timeout)."), prometheus.GaugeValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.queued.Load()) }},
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
		{desc("vm_stalls_total", "Times the VM thread was held longer than the stall threshold."), prometheus.CounterValue,
			func(rt *Runtime, _ *VMStats) float64 { return float64(rt.counters.stalls.Load()) }},
		{desc("fibers_requests", "Request fibers alive."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.Requests) }},
		{desc("fibers_scheduled", "Fibers started with Fiber.schedule, alive."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.Fibers) }},
		{desc("offload_threads_busy", "Offload threads running a block."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.OffloadBusy) }},
		{desc("offload_callers_waiting", "Callers waiting for an offload thread."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.OffloadWaiting) }},
		{desc("ruby_gc_total", "Ruby garbage collections."), prometheus.CounterValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.GCCount) }},
		{desc("ruby_gc_seconds_total", "Time Ruby spent collecting garbage."), prometheus.CounterValue,
			func(_ *Runtime, s *VMStats) float64 { return s.GCTime.Seconds() }},
		{desc("ruby_heap_live_slots", "Live object slots in Ruby's heap."), prometheus.GaugeValue,
			func(_ *Runtime, s *VMStats) float64 { return float64(s.HeapLiveSlots) }},
	}
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rejectedDesc
	for _, m := range metrics {
		ch <- m.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	rt := (*Runtime)(c)
	s := rt.Stats()
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedCount.Load()), "max_requests")
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedQueue.Load()), "queue_timeout")
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(rt.counters.rejectedBody.Load()), "body_budget")
	for _, m := range metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(rt, &s))
	}
}
