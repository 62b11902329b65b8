package ruvoy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// A pool is the worker processes one app runs in (cluster mode): each is
// this binary started again (RunWorker) with its own VM and the app
// loaded, joined to the front end by a unix socket that carries the same
// messages a local VM exchanges (wire.h: "Workers"). The front end keeps
// the listeners, TLS, admission, the streams and the client connections;
// a request goes to the worker with the fewest requests in flight, and a
// worker that dies is replaced.
type pool struct {
	rt        *Runtime
	cfg       workerConfig
	maxRSS    uint64
	timeout   time.Duration            // a worker that has not reported for this long is killed
	slots     []atomic.Pointer[worker] // the worker serving each slot; nil while one starts
	rr        atomic.Uint32
	mu        sync.Mutex
	closing   bool
	restartMu sync.Mutex     // one restart at a time
	live      sync.WaitGroup // workers not yet exited
	slotSt    []slotState
	stopped   chan struct{} // closed once stop is called
	awaitMu   sync.Mutex
	newcomer  chan struct{} // closed when a new worker takes a slot (await)
	codes     []int         // exit statuses of the workers stopped by stop
}

// slotState is what outlives one worker in a slot.
type slotState struct {
	restarts atomic.Int64
	backoff  time.Duration // the wait before the next restart after a quick death
}

const (
	// A worker that dies within quickDeath of its start is in a crash loop:
	// each restart waits twice as long as the last, up to maxBackoff.
	quickDeath   = 10 * time.Second
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 30 * time.Second
	// heldPenalty ranks a worker whose VM thread is held behind every
	// worker that is not: it gets new requests only when all are held,
	// and then the one held the shortest time first (a busy machine can
	// hold a healthy worker past rv_held.c's 10 ms for a moment; one stuck in a
	// long call must not win because it has fewer requests).
	heldPenalty = 1 << 40
	// A worker that has not reported for silentAfter (it does every
	// statsEvery) gets new requests only when every worker is silent; one
	// silent for the pool's timeout is killed (watch).
	silentAfter = 4 * statsEvery
	// rssEvery bounds how often a worker's memory is read: at the end of
	// its requests, and at each look of the watch.
	rssEvery = 10 * time.Millisecond
	// defaultWorkerTimeout is --worker-timeout's default.
	defaultWorkerTimeout = 30 * time.Second
)

func (rt *Runtime) startPool(o AppOptions, rackup, environment, clusters string) (*pool, error) {
	window := rt.opts.ResponseWindow
	if o.ResponseWindow > 0 {
		window = int(o.ResponseWindow)
	}
	timeout := o.WorkerTimeout
	if timeout <= 0 {
		timeout = defaultWorkerTimeout
	}
	p := &pool{rt: rt, maxRSS: uint64(max(o.WorkerMaxRSS, 0)), timeout: timeout, slots: make([]atomic.Pointer[worker], o.Workers),
		slotSt: make([]slotState, o.Workers), stopped: make(chan struct{}),
		cfg: workerConfig{Program: rt.opts.Program, Args: rt.opts.Args, ResponseWindow: window,
			StallWarn: time.Duration(rt.stallWarn.Load()), HoldLimit: time.Duration(rt.holdLimit.Load()),
			Rackup: rackup, Environment: environment, Clusters: clusters}}
	errs := make(chan error, o.Workers)
	for i := range o.Workers {
		go func() {
			w, err := p.spawn(i)
			if err == nil {
				p.slots[i].Store(w)
			}
			errs <- err
		}()
	}
	var first error
	for range o.Workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		p.stop()
		var boot *BootError
		if errors.As(first, &boot) {
			rt.lastBoot.Store(boot)
		}
		return nil, first
	}
	rt.poolsMu.Lock()
	rt.pools[p] = struct{}{}
	rt.poolsMu.Unlock()
	go p.watch()
	rt.log().Info("ruvoy: workers serving", zap.String("rackup", rackup), zap.Int("workers", o.Workers))
	return p, nil
}

// spawn starts a worker for slot and returns it once its app has loaded.
func (p *pool) spawn(slot int) (*worker, error) {
	conn, theirs, err := socketPair("ruvoy: a worker's socket")
	if err != nil {
		return nil, err
	}
	urgent, theirUrgent, err := socketPair("ruvoy: a worker's urgent socket")
	if err != nil {
		conn.Close()
		theirs.Close()
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		for _, c := range []io.Closer{conn, urgent, theirs, theirUrgent} {
			c.Close()
		}
		return nil, fmt.Errorf("ruvoy: finding this binary to start workers: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"ruvoy: worker " + strconv.Itoa(slot)}
	cmd.Env = append(os.Environ(), WorkerFDEnv+"=3") // and its urgent socket, 4
	cmd.ExtraFiles = []*os.File{theirs, theirUrgent}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The worker has its own copies of its ends once started: with none
	// left here, its death ends the socket (EOF) even while its app loads.
	err = cmd.Start()
	theirs.Close()
	theirUrgent.Close()
	if err != nil {
		conn.Close()
		urgent.Close()
		return nil, fmt.Errorf("ruvoy: starting a worker: %w", err)
	}
	w := &worker{pool: p, slot: slot, cmd: cmd, conn: conn, out: newFrameWriter(conn), urgent: newFrameWriter(urgent), started: time.Now(),
		streams: map[uint64]struct{}{}, ready: make(chan bootResult, 1), readDone: make(chan struct{})}
	if p.maxRSS > 0 {
		w.statm, _ = os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/statm")
	}
	p.live.Add(1)
	go w.read()
	go w.supervise()
	cfg := p.cfg
	cfg.Slot = slot
	b, _ := json.Marshal(cfg)
	w.out.send(wire.WorkerConfig, 0, 0, 0, b)
	r := <-w.ready
	if r.err != nil {
		w.retire()
		return nil, r.err
	}
	w.heard.Store(time.Now().UnixNano())
	return w, nil
}

// socketPair makes a connected pair of unix sockets: ours, and the file
// of theirs for a worker to inherit.
func socketPair(what string) (*net.UnixConn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ruvoy-worker"), os.NewFile(uintptr(fds[1]), "ruvoy-front-end")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return c.(*net.UnixConn), theirs, nil
}

// pick is the worker a new request goes to: the one with the fewest
// requests in flight, a worker whose VM thread Ruby code holds last (the
// longest held the very last); among equals, the next after the last one
// picked. nil: none serves.
func (p *pool) pick() *worker {
	n := uint32(len(p.slots))
	start := p.rr.Add(1)
	var best *worker
	bestLoad := int64(-1)
	for i := range n {
		w := p.slots[(start+i)%n].Load()
		if w == nil || w.retiring.Load() || w.gone.Load() {
			continue
		}
		load := w.inflight.Load()
		if w.silent.Load() {
			load += 2 * heldPenalty // stopped, frozen: after every worker that reports
		}
		if since := w.heldSince.Load(); since != 0 {
			held := time.Now().UnixNano() - since  // only for a held worker: not on every request
			load += heldPenalty + max(held, 0)>>10 // a microsecond held weighs a request
		}
		if best == nil || load < bestLoad {
			best, bestLoad = w, load
		}
	}
	return best
}

// workerWait is how long a request that finds no worker serving (all of
// them restarting) waits for one before it gets 503, as a request waits
// in the listen queue of a server whose workers accept connections.
const workerWait = 5 * time.Second

// await is a worker for a new request when none serves now: the first to
// take a slot within workerWait; nil if none did, or r's client left.
func (p *pool) await(r *http.Request) *worker {
	timer := time.NewTimer(workerWait)
	defer timer.Stop()
	for {
		p.awaitMu.Lock()
		if p.newcomer == nil {
			p.newcomer = make(chan struct{})
		}
		newcomer := p.newcomer
		p.awaitMu.Unlock()
		if w := p.pick(); w != nil {
			return w
		}
		select {
		case <-newcomer:
		case <-timer.C:
			return nil
		case <-r.Context().Done():
			return nil
		}
	}
}

// announce wakes the requests waiting for a worker (await).
func (p *pool) announce() {
	p.awaitMu.Lock()
	if p.newcomer != nil {
		close(p.newcomer)
		p.newcomer = nil
	}
	p.awaitMu.Unlock()
}

// exited is told by a worker's supervisor that it ended: unless the pool
// or the worker was stopping, a new worker takes the slot, at once after
// a worker that served a while, after a growing wait in a crash loop.
func (p *pool) exited(w *worker) {
	p.slots[w.slot].CompareAndSwap(w, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || w.retiring.Load() {
		return
	}
	st := &p.slotSt[w.slot]
	st.restarts.Add(1)
	if time.Since(w.started) < quickDeath {
		st.backoff = min(max(2*st.backoff, firstBackoff), maxBackoff)
	} else {
		st.backoff = 0
	}
	p.rt.log().Warn("ruvoy: restarting worker", zap.Int("worker", w.slot), zap.Duration("in", st.backoff))
	time.AfterFunc(st.backoff, func() { p.replace(w.slot) })
}

// replace starts a worker for slot; the one there, if any, drains and
// stops once the new one serves.
func (p *pool) replace(slot int) {
	w, err := p.spawn(slot)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		st := &p.slotSt[slot]
		st.backoff = min(max(2*st.backoff, firstBackoff), maxBackoff)
		if !p.closing {
			p.rt.log().Error("ruvoy: a new worker failed to start", zap.Int("worker", slot),
				zap.Duration("retry_in", st.backoff), zap.String("error", err.Error()))
			time.AfterFunc(st.backoff, func() { p.replace(slot) })
		}
		return
	}
	if p.closing {
		w.retire()
		return
	}
	if old := p.slots[slot].Swap(w); old != nil {
		old.retire()
	}
	p.announce()
}

// restart replaces every worker with a new one, which loads the app's
// code as it is now: all new workers boot first (a boot error leaves the
// old ones serving and is returned), then each takes its slot's new
// requests, and the old one stops once its requests end. The listeners
// and connections stay as they are.
func (p *pool) restart() error {
	p.restartMu.Lock()
	defer p.restartMu.Unlock()
	fresh := make([]*worker, len(p.slots))
	errs := make(chan error, len(p.slots))
	for i := range p.slots {
		go func() {
			w, err := p.spawn(i)
			fresh[i] = w
			errs <- err
		}()
	}
	var first error
	for range p.slots {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if first != nil || p.closing {
		for _, w := range fresh {
			if w != nil {
				w.retire()
			}
		}
		return first
	}
	for i, w := range fresh {
		if w.gone.Load() {
			continue // it died already: its supervisor fills the slot
		}
		if old := p.slots[i].Swap(w); old != nil {
			old.retire()
		}
	}
	p.announce()
	return nil
}

// RestartWorkers restarts the workers of every app in cluster mode (see
// pool.restart) and reports whether there were any; a boot error leaves
// the old workers serving.
func (rt *Runtime) RestartWorkers() (bool, error) {
	pools := rt.poolList()
	for _, p := range pools {
		if err := p.restart(); err != nil {
			var boot *BootError
			if errors.As(err, &boot) {
				rt.lastBoot.Store(boot)
			}
			return true, err
		}
	}
	return len(pools) > 0, nil
}

// watch looks at the workers every second (more often under a short
// timeout): one silent for silentAfter is picked last; one silent for the
// pool's timeout (stopped, frozen) is killed, its requests answered 504
// (supervise), and replaced; one grown past maxRSS is replaced.
func (p *pool) watch() {
	every := min(time.Second, p.timeout/4)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stopped:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		for i := range p.slots {
			w := p.slots[i].Load()
			if w == nil || w.gone.Load() || w.stopping.Load() {
				continue
			}
			silence := time.Duration(now - w.heard.Load())
			w.silent.Store(silence >= min(silentAfter, p.timeout/2))
			if silence >= p.timeout && w.timedOut.CompareAndSwap(false, true) {
				p.rt.log().Error("ruvoy: a worker stopped reporting (stopped or frozen): killing it, its requests get 504",
					zap.Int("worker", i), zap.Int("pid", w.cmd.Process.Pid), zap.Duration("silent_for", silence),
					zap.Int64("requests", w.inflight.Load()))
				w.cmd.Process.Kill()
				continue
			}
			if p.maxRSS > 0 {
				w.checkRSS()
			}
		}
	}
}

// overRSS replaces w, which grew past maxRSS (rss). It takes no new
// request at once when another worker serves (a leak grows with each
// request); otherwise it serves on while its replacement boots, unless it
// grows an eighth past maxRSS first: then requests wait for the new one
// (await). So a worker ends at most about a quarter over: an eighth, and
// what its requests under way add.
func (p *pool) overRSS(w *worker, rss uint64) {
	if w.replacing.CompareAndSwap(false, true) {
		p.rt.log().Warn("ruvoy: a worker grew past --worker-max-rss: replacing it",
			zap.Int("worker", w.slot), zap.Int("pid", w.cmd.Process.Pid), zap.Uint64("rss_bytes", rss), zap.Uint64("max_bytes", p.maxRSS))
		go p.replace(w.slot)
	}
	alone := true
	for i := range p.slots {
		if o := p.slots[i].Load(); o != nil && o != w && !o.retiring.Load() && !o.gone.Load() && !o.replacing.Load() {
			alone = false
		}
	}
	if !alone || rss > p.maxRSS+p.maxRSS/8 {
		w.retire()
	}
}

// stop ends the pool's workers: each finishes or unwinds its requests
// (Runtime.Shutdown in the worker) and exits. It returns the highest exit
// status among them, once all have exited.
func (p *pool) stop() int {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		p.live.Wait()
		return maxCode(p.codes)
	}
	p.closing = true
	close(p.stopped)
	p.mu.Unlock()
	for i := range p.slots {
		if w := p.slots[i].Swap(nil); w != nil {
			w.stop()
		}
	}
	p.live.Wait()
	p.rt.poolsMu.Lock()
	delete(p.rt.pools, p)
	p.rt.poolsMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return maxCode(p.codes)
}

func maxCode(codes []int) int {
	m := 0
	for _, c := range codes {
		m = max(m, c)
	}
	return m
}

// poolList is the pools of the apps not yet unloaded, at this moment.
func (rt *Runtime) poolList() []*pool {
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	pools := make([]*pool, 0, len(rt.pools))
	for p := range rt.pools {
		pools = append(pools, p)
	}
	return pools
}

// stopPools stops every pool (the process is exiting).
func (rt *Runtime) stopPools() int {
	pools := rt.poolList()
	codes := make(chan int, len(pools))
	for _, p := range pools {
		go func() { codes <- p.stop() }()
	}
	code := 0
	for range pools {
		code = max(code, <-codes)
	}
	return code
}

// noWorker answers a request that found no worker serving (all of them
// restarting).
func noWorker(w http.ResponseWriter, r *http.Request) {
	w.Header()["Retry-After"] = []string{"1"}
	refuse(w, r, http.StatusServiceUnavailable)
}
