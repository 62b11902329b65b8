// Package metrics reports the runtime's figures (serve.Figures) as
// Prometheus metrics, for Caddy's /metrics.
package metrics

import (
	"runtime"
	"strconv"

	"github.com/ruvoy/ruvoy/internal/serve"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector reports rt's metrics.
func Collector(rt *serve.Runtime) prometheus.Collector { return collector{rt} }

type collector struct{ rt *serve.Runtime }

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(f *serve.Figures) float64
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("ruvoy_"+name, help, labels, nil)
}

var (
	rejectedDesc  = desc("requests_rejected_total", "Requests answered 503 before reaching Ruby, by reason.", "reason")
	queueTimeDesc = desc("request_queue_seconds", "How long requests waited, from their head's arrival to the app's call (for a place, a worker, the VM thread).")
	metrics       = []metric{
		{desc("requests_admitted_total", "Requests admitted to Ruby."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.Admitted) }},
		{desc("requests_direct_total", "Requests whose handler waited for the VM's answer on its own thread, as it does when requests come one at a time."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.Direct) }},
		{desc("go_processors", "Go's processors (GOMAXPROCS): 1 while requests come one at a time, when they follow the load (RUVOY_PROCS_BY_LOAD)."), prometheus.GaugeValue,
			func(*serve.Figures) float64 { return float64(runtime.GOMAXPROCS(0)) }},
		{desc("go_processors_changes_total", "Times Go's processors were lowered to 1 or given back as the load changed."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.ProcsChanges) }},
		{desc("requests_in_flight", "Requests holding a place in Ruby (their client may have left)."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.InFlight) }},
		{desc("requests_orphaned", "Requests whose client left (reset, closed) while Ruby still unwinds them; they hold no place."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.Orphans) }},
		{desc("hijacked_connections", "Connections apps took over (rack.hijack, WebSocket upgrades) and still hold."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.Hijacked) }},
		{desc("requests_queued", "Requests waiting for a place (queue timeout)."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.Queued) }},
		{desc("requests_queued_on_connection", "HTTP/2 and HTTP/3 requests waiting for one of their connection's places (max-requests-per-connection)."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.QueuedOnConn) }},
		{desc("responses_cut_write_timeout_total", "Responses cut because their client took none of them for the write timeout (--write-timeout)."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.WriteCuts) }},
		{desc("queue_wait_seconds_total", "Time admitted requests spent waiting for a place."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return f.QueueWait.Seconds() }},
		{desc("request_body_bytes_held", "Request body bytes read from clients and not yet taken by apps."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.BodyHeld) }},
		{desc("response_body_bytes_in_flight", "Response bytes the VM produced that clients have not taken yet."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.ResponseBytes) }},
		{desc("vm_busy_seconds_total", "Time the VM thread spent working (rate() of it is the busy ratio)."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return f.VM.Busy.Seconds() }},
		{desc("vm_loop_lag_seconds", "How late the event loop's last periodic tick ran, or how long Ruby code has held the VM thread while it does."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return f.VM.LoopLag.Seconds() }},
		{desc("vm_holds_total", "Times Ruby code held the VM thread past the hold warning (--hold-warn)."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.VM.Holds) }},
		// Its name before; kept for a release (docs/overload.md).
		{desc("vm_stalls_total", "Deprecated: ruvoy_vm_holds_total, under its former name."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.VM.Holds) }},
		{desc("fibers_requests", "Request fibers alive."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.Requests) }},
		{desc("fibers_scheduled", "Fibers started with Fiber.schedule, alive."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.Fibers) }},
		{desc("offload_threads_busy", "Offload threads running a block."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.OffloadBusy) }},
		{desc("offload_callers_waiting", "Callers waiting for an offload thread."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.OffloadWaiting) }},
		{desc("memory_releases_total", "Idle spells after which this process gave the kernel back malloc's free pages and Go's idle heap (2 s without a request)."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.Releases) }},
		{desc("ruby_gc_total", "Ruby garbage collections."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.VM.GCCount) }},
		{desc("ruby_gc_seconds_total", "Time Ruby spent collecting garbage."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return f.VM.GCTime.Seconds() }},
		{desc("ruby_heap_live_slots", "Live object slots in Ruby's heap."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return float64(f.VM.HeapLiveSlots) }},
		{desc("ruby_gc_idle_total", "Ruby garbage collections run between requests (--gc-when-idle)."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return float64(f.VM.IdleGCs) }},
		{desc("ruby_gc_idle_seconds_total", "Time the collections run between requests took."), prometheus.CounterValue,
			func(f *serve.Figures) float64 { return f.VM.IdleGCTime.Seconds() }},
		{desc("ruby_gc_idle_longest_seconds", "The longest collection run between requests: the most a request that came meanwhile waited for one."), prometheus.GaugeValue,
			func(f *serve.Figures) float64 { return f.VM.IdleGCLongest.Seconds() }},
	}
)

// Cluster mode: each worker's own series, labelled by its slot (0 to
// workers-1); a slot's replacements keep its label.
var (
	workerInFlightDesc = desc("worker_requests_in_flight", "Requests a worker runs.", "worker")
	workerHeldDesc     = desc("worker_held", "1 while Ruby code, or a collection between requests (--gc-when-idle), holds the worker's VM thread (it gets no new requests).", "worker")
	workerRSSDesc      = desc("worker_rss_bytes", "A worker's resident memory.", "worker")
	workerBusyDesc     = desc("worker_vm_busy_seconds_total", "Time a worker's VM thread spent working (resets when the worker is replaced).", "worker")
	workerRestartsDesc = desc("worker_restarts_total", "Workers started again in a slot after one died.", "worker")
	workerQueueDesc    = desc("worker_request_queue_seconds", "How long a worker's requests waited, from their head's arrival to the app's call.", "worker")
	workersDesc        = desc("workers", "Worker processes serving.")
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rejectedDesc
	ch <- queueTimeDesc
	for _, m := range metrics {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{workerInFlightDesc, workerHeldDesc, workerRSSDesc, workerBusyDesc, workerRestartsDesc, workerQueueDesc, workersDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	f := c.rt.Figures()
	for reason, n := range map[string]int64{"max_requests": f.RejectedMaxRequests, "queue_timeout": f.RejectedQueueTimeout,
		"max_requests_per_client": f.RejectedPerClient, "body_budget": f.RejectedBodyBudget} {
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(n), reason)
	}
	for _, m := range metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&f))
	}
	ch <- histogram(queueTimeDesc, f.QueueTime)
	collectWorkers(ch, &f)
}

func collectWorkers(ch chan<- prometheus.Metric, f *serve.Figures) {
	if f.Workers == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(f.Serving))
	for i, w := range f.Workers {
		label := strconv.Itoa(i)
		held := 0.0
		if w.Held {
			held = 1
		}
		ch <- prometheus.MustNewConstMetric(workerInFlightDesc, prometheus.GaugeValue, float64(w.InFlight), label)
		ch <- prometheus.MustNewConstMetric(workerHeldDesc, prometheus.GaugeValue, held, label)
		ch <- prometheus.MustNewConstMetric(workerRSSDesc, prometheus.GaugeValue, float64(w.RSS), label)
		ch <- prometheus.MustNewConstMetric(workerBusyDesc, prometheus.CounterValue, w.Busy.Seconds(), label)
		ch <- prometheus.MustNewConstMetric(workerRestartsDesc, prometheus.CounterValue, float64(w.Restarts), label)
		ch <- histogram(workerQueueDesc, w.QueueTime, label)
	}
}

// histogram is h as Prometheus counts one: cumulative, by upper bound.
func histogram(d *prometheus.Desc, h serve.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, c := range h.Counts {
		n += c
		if i < len(h.Bounds) {
			buckets[h.Bounds[i]] = n
		}
	}
	return prometheus.MustNewConstHistogram(d, n, h.Sum.Seconds(), buckets, labels...)
}
