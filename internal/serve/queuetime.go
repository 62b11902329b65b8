package serve

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Request queue time: how long a request waited, from its head's arrival
// to the app's call (for a place, for a worker, for the VM thread).
// Autoscalers and APM agents (New Relic, Scout, Judoscale) read it from
// X-Request-Start, which a load balancer in front sets: a server that
// faces the clients itself sets it, in Apache's form (t=<microseconds
// since the epoch>), which those agents parse. The VM measures the wait
// against the arrival the head carries, on the clock every process of
// the machine shares, and says it with the response's head (wire.h,
// RV_AUX_QUEUED_SHIFT); the runtime counts it in histograms, the whole
// server's and each worker's, and the access log names it.

const requestStartHeader = "X-Request-Start"

// arrival is when a request's head arrived: the wall clock, for
// X-Request-Start, and CLOCK_MONOTONIC, which the VM (in this process or
// a worker) reads too.
type arrival struct {
	wall time.Time
	mono uint64 // ns
}

// monoBase is CLOCK_MONOTONIC at a moment Go's own monotonic clock (the
// same clock, read without a system call) also marks: a request's
// CLOCK_MONOTONIC is taken from the two, not by a system call each.
var monoBase, monoSince = func() (uint64, time.Time) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano()), time.Now()
}()

func arrived() arrival {
	now := time.Now()
	return arrival{wall: now, mono: monoBase + uint64(now.Sub(monoSince))}
}

// requestStart is the X-Request-Start the app sees: a trusted proxy's, or
// when the head arrived here.
func requestStart(r *http.Request, trusted bool, at arrival) string {
	if v := r.Header.Get(requestStartHeader); trusted && v != "" {
		return v
	}
	var b [24]byte
	return string(strconv.AppendInt(append(b[:0], "t="...), at.wall.UnixMicro(), 10))
}

// queueBounds are the queue time histograms' upper bounds, in seconds
// (Prometheus' default buckets, and a millisecond).
var queueBounds = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// histogram counts durations by queueBounds, without a lock.
type histogram struct {
	counts [13]atomic.Uint64 // by bound; the last past every bound
	sumNS  atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	s, i := d.Seconds(), 0
	for i < len(queueBounds) && s > queueBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNS.Add(int64(d))
}

// Histogram is a histogram read at a moment: Counts[i] is how many fell
// at or below Bounds[i] and above the bound before; the last, past every
// bound.
type Histogram struct {
	Bounds []float64 // seconds
	Counts []uint64
	Sum    time.Duration
}

func (h *histogram) read() Histogram {
	out := Histogram{Bounds: queueBounds, Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sumNS.Load())}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	return out
}

// queueTimes is the server's queue time histogram, and each worker
// slot's in cluster mode.
type queueTimes struct {
	all    histogram
	bySlot sync.Map // slot -> *histogram
}

// observe counts a request's queue time (slot: its worker's, -1 in one
// process).
func (q *queueTimes) observe(slot int, d time.Duration) {
	q.all.observe(d)
	if slot < 0 {
		return
	}
	h, ok := q.bySlot.Load(slot)
	if !ok {
		h, _ = q.bySlot.LoadOrStore(slot, new(histogram))
	}
	h.(*histogram).observe(d)
}

// slot is a worker slot's histogram read, or none yet.
func (q *queueTimes) slot(i int) Histogram {
	if h, ok := q.bySlot.Load(i); ok {
		return h.(*histogram).read()
	}
	return (&histogram{}).read()
}

// queued is told a request's queue time, as its response's head came: it
// counts it and has the access log name it.
func (rs *responder) queued(d time.Duration) {
	slot := -1
	if w, ok := rs.link.(interface{ Slot() int }); ok {
		slot = w.Slot()
	}
	rs.app.rt.queueTimes.observe(slot, d)
	if rs.app.opts.AccessLog != nil {
		rs.app.opts.AccessLog(rs.r, zap.Float64("queue_time", d.Seconds()))
	}
}
