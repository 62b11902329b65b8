// Package frontend is cluster mode's front end: it runs an app's worker
// processes (a Pool), each the binary started again with a VM of its own
// (internal/cluster/worker), and is the way to them. A worker joined by a
// unix socket is a VM like this process's own to the request path: the
// same messages cross as frames (wire.h, "Workers"; framewriter.go,
// framereader.go), and what a worker sends is handed to the Router as the
// dispatcher hands on a local VM's messages. The front end keeps the
// listeners, TLS, admission, the streams and the clients' connections; a
// request goes to the worker with the fewest requests in flight (Pick), and
// a worker that dies, or stops reporting, is replaced (supervise, check).
package frontend

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// Config is a pool's settings.
type Config struct {
	Workers int
	MaxRSS  uint64        // replace a worker whose resident memory grows past it (bytes; 0: never)
	Timeout time.Duration // a worker that has not reported for this long is killed (0: DefaultTimeout)
	Worker  cluster.Config
	// Template, when set, is a wire.TemplateBoot payload (--preload): a
	// template process boots the app once and forks the workers.
	Template []byte
	Router   Router
	Logger   func() *zap.Logger
}

// A Router takes what the workers send, as the dispatcher takes what this
// process's VM sends.
type Router interface {
	Route(m *msg.Msg)                    // messages chained (msg.Next), as the VM sends them: requests' messages, upstream calls
	Log(m *msg.Msg, fields ...zap.Field) // a log entry the worker's VM made (the caller frees m)
}

// BootError is a worker whose app failed to load: Message is Ruby's error
// and backtrace.
type BootError struct{ Message string }

func (e *BootError) Error() string { return e.Message }

// A Pool is the worker processes one app runs in.
type Pool struct {
	cfg       Config
	tmplMu    sync.Mutex               // one fork at a time; a new template between them
	tmpl      *template                // with --preload
	slots     []atomic.Pointer[Handle] // the worker serving each slot; nil while one starts (MaxWorkers of them)
	size      atomic.Int32             // the slots in use, from 0 (Grow, Shrink)
	rr        atomic.Uint32
	mu        sync.Mutex
	closing   bool
	restartMu sync.Mutex     // one restart, or one change of size, at a time
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
	// cluster.StatsEvery) gets new requests only when every worker is
	// silent; one silent for the pool's timeout is killed (check).
	silentAfter = 4 * cluster.StatsEvery
	// rssEvery bounds how often a worker's memory is read: at the end of
	// its requests, and at each look of check.
	rssEvery = 10 * time.Millisecond
	// pssEvery bounds how often a forked worker's PSS is read, once its
	// RSS is past maxRSS.
	pssEvery = 100 * time.Millisecond
	// MaxWorkers is the most workers a pool may have.
	MaxWorkers = 256
	// DefaultTimeout is --worker-timeout's default.
	DefaultTimeout = 30 * time.Second
	// bootTimeouts is how many timeouts a worker may take to load its app
	// (2 minutes by default), with no report meanwhile: one stopped or
	// stuck in its boot is killed, or a start, a replacement or a rolling
	// restart would wait for it forever.
	bootTimeouts = 4
	// stopWait is how long a stopped worker has to exit before it is
	// killed: it unwinds its requests and cleans its VM up (the runtime's
	// Shutdown: 3 s, then 5 s).
	stopWait = 10 * time.Second
)

// Start boots the pool's workers and returns once all serve, or with the
// first error (a *BootError when the app failed to load).
func Start(cfg Config) (*Pool, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Workers < 1 || cfg.Workers > MaxWorkers {
		return nil, fmt.Errorf("ruvoy: %d workers: want 1 to %d", cfg.Workers, MaxWorkers)
	}
	p := &Pool{cfg: cfg, slots: make([]atomic.Pointer[Handle], MaxWorkers),
		slotSt: make([]slotState, MaxWorkers), stopped: make(chan struct{})}
	p.size.Store(int32(cfg.Workers))
	if len(cfg.Template) > 0 {
		t, err := p.startTemplate()
		if err != nil {
			return nil, err
		}
		p.tmpl = t
	}
	errs := make(chan error, cfg.Workers)
	for i := range cfg.Workers {
		go func() {
			w, err := p.spawn(i)
			if err == nil {
				p.slots[i].Store(w)
			}
			errs <- err
		}()
	}
	var first error
	for range cfg.Workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		p.Stop()
		return nil, first
	}
	go p.check()
	// Debug: the command line's banner names the workers (and under `ruvoy
	// run`, Caddy's "serving initial configuration" follows).
	p.log().Debug("ruvoy: workers serving", zap.String("rackup", cfg.Worker.Rackup), zap.Int("workers", cfg.Workers))
	return p, nil
}

func (p *Pool) log() *zap.Logger { return p.cfg.Logger() }

// Rackup is the app the pool's workers run.
func (p *Pool) Rackup() string { return p.cfg.Worker.Rackup }

// spawn starts a worker for slot and returns it once its app has loaded.
func (p *Pool) spawn(slot int) (*Handle, error) {
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
	var proc *os.Process
	if p.cfg.Template != nil {
		proc, err = p.forkWorker(slot, theirs, theirUrgent)
	} else {
		proc, err = execWorker(slot, theirs, theirUrgent)
	}
	// The worker has its own copies of its ends once started: with none
	// left here, its death ends the socket (EOF) even while its app loads.
	theirs.Close()
	theirUrgent.Close()
	if err != nil {
		conn.Close()
		urgent.Close()
		return nil, err
	}
	w := &Handle{pool: p, slot: slot, proc: proc, conn: conn, out: newFrameWriter(conn), urgent: newFrameWriter(urgent), started: time.Now(),
		streams: map[uint64]struct{}{}, ready: make(chan bootResult, 1), readDone: make(chan struct{})}
	if p.cfg.MaxRSS > 0 {
		w.statm, _ = os.Open("/proc/" + strconv.Itoa(proc.Pid) + "/statm")
	}
	p.live.Add(1)
	go w.read()
	go w.supervise()
	cfg := p.cfg.Worker
	cfg.Slot = slot
	b, _ := json.Marshal(cfg)
	w.out.send(wire.WorkerConfig, 0, 0, 0, b)
	var r bootResult
	timedOut := false
	select {
	case r = <-w.ready:
	case <-time.After(bootTimeouts * p.cfg.Timeout):
		timedOut = true
		r.err = fmt.Errorf("ruvoy: worker %d did not finish loading its app in %v (stopped, or stuck): killed",
			slot, bootTimeouts*p.cfg.Timeout)
	}
	if r.err != nil {
		// It is not told to stop, as a stopping worker's exit status is
		// the server's: it ends by itself (its boot failed), else it is
		// killed. No other worker starts when it ends (exited): the
		// caller decides.
		w.retiring.Store(true)
		if timedOut {
			w.proc.Kill()
		} else {
			time.AfterFunc(stopWait, func() { w.proc.Kill() }) // once it has exited, this fails harmlessly
		}
		return nil, r.err
	}
	w.heard.Store(time.Now().UnixNano())
	return w, nil
}

// execWorker starts the binary again as the worker of slot.
func execWorker(slot int, theirs, theirUrgent *os.File) (*os.Process, error) {
	// Its socket at 3, and its urgent socket at 4.
	cmd, err := startSelf("ruvoy: worker "+strconv.Itoa(slot), cluster.FDEnv+"=3", theirs, theirUrgent)
	if err != nil {
		return nil, fmt.Errorf("ruvoy: starting a worker: %w", err)
	}
	return cmd.Process, nil
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

// Pick is the worker a new request goes to: the one with the fewest
// requests in flight, a worker whose VM thread Ruby code holds last (the
// longest held the very last), one that has stopped reporting after that;
// among equals, the next after the last one picked. nil: none serves.
func (p *Pool) Pick() *Handle {
	n := uint32(p.size.Load())
	start := p.rr.Add(1)
	var best *Handle
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

// Serving says whether a worker takes requests: one that is not leaving
// and reports.
func (p *Pool) Serving() bool {
	for i := range p.inUse() {
		if w := p.slots[i].Load(); w != nil && !w.retiring.Load() && !w.gone.Load() && !w.silent.Load() {
			return true
		}
	}
	return false
}

// workerWait is how long a request that finds no worker serving (all of
// them restarting) waits for one before it gets 503, as a request waits
// in the listen queue of a server whose workers accept connections.
const workerWait = 5 * time.Second

// Await is a worker for a new request when none serves now: the first to
// take a slot within workerWait; nil if none did, or r's client left.
func (p *Pool) Await(r *http.Request) *Handle {
	timer := time.NewTimer(workerWait)
	defer timer.Stop()
	for {
		p.awaitMu.Lock()
		if p.newcomer == nil {
			p.newcomer = make(chan struct{})
		}
		newcomer := p.newcomer
		p.awaitMu.Unlock()
		if w := p.Pick(); w != nil {
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
func (p *Pool) announce() {
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
func (p *Pool) exited(w *Handle) {
	p.slots[w.slot].CompareAndSwap(w, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || w.retiring.Load() || w.slot >= p.inUse() {
		return
	}
	st := &p.slotSt[w.slot]
	st.restarts.Add(1)
	if time.Since(w.started) < quickDeath {
		st.backoff = min(max(2*st.backoff, firstBackoff), maxBackoff)
	} else {
		st.backoff = 0
	}
	p.log().Warn("ruvoy: restarting worker", zap.Int("worker", w.slot), zap.Duration("in", st.backoff))
	time.AfterFunc(st.backoff, func() { p.replace(w.slot) })
}

// replace starts a worker for slot; the one there, if any, drains and
// stops once the new one serves.
func (p *Pool) replace(slot int) {
	w, err := p.spawn(slot)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		st := &p.slotSt[slot]
		st.backoff = min(max(2*st.backoff, firstBackoff), maxBackoff)
		if !p.closing {
			p.log().Error("ruvoy: a new worker failed to start", zap.Int("worker", slot),
				zap.Duration("retry_in", st.backoff), zap.String("error", err.Error()))
			time.AfterFunc(st.backoff, func() { p.replace(slot) })
		}
		return
	}
	if p.closing || slot >= p.inUse() { // the pool shrank meanwhile
		w.retire()
		return
	}
	if old := p.slots[slot].Swap(w); old != nil {
		old.retire()
	}
	p.announce()
}

// Restart replaces every worker with a new one, which loads the app's
// code as it is now: all new workers boot first (a boot error leaves the
// old ones serving and is returned), then each takes its slot's new
// requests, and the old one stops once its requests end. The listeners
// and connections stay as they are. With --preload a new template loads
// the code first, and the new workers are forked from it.
func (p *Pool) Restart() error {
	p.restartMu.Lock()
	defer p.restartMu.Unlock()
	if p.cfg.Template != nil {
		if err := p.renewTemplate(); err != nil {
			return err
		}
	}
	n := p.inUse()
	fresh := make([]*Handle, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			w, err := p.spawn(i)
			fresh[i] = w
			errs <- err
		}()
	}
	var first error
	for range n {
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

// inUse is how many slots the pool has now.
func (p *Pool) inUse() int { return int(p.size.Load()) }

// Grow adds a worker in a new slot and returns the pool's size once it
// serves; a worker that fails to boot leaves the pool as it was. One
// change of size, or restart, at a time.
func (p *Pool) Grow() (int, error) {
	p.restartMu.Lock()
	defer p.restartMu.Unlock()
	n := p.inUse()
	if n >= MaxWorkers {
		return n, fmt.Errorf("ruvoy: the pool has %d workers already, the most it may", n)
	}
	p.slotSt[n] = slotState{}
	p.size.Store(int32(n + 1)) // a slot whose worker starts: nil, as after a death
	w, err := p.spawn(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || p.closing {
		p.size.Store(int32(n))
		if w != nil {
			w.retire()
		}
		return n, err
	}
	p.slots[n].Store(w)
	p.announce()
	return n + 1, nil
}

// Shrink retires the worker of the last slot, which stops once its
// requests end, and returns the pool's size; never below one worker.
func (p *Pool) Shrink() (int, error) {
	p.restartMu.Lock()
	defer p.restartMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.inUse()
	if n <= 1 {
		return n, fmt.Errorf("ruvoy: the pool has one worker: it keeps it")
	}
	p.size.Store(int32(n - 1)) // no new request picks the slot from now on
	if w := p.slots[n-1].Swap(nil); w != nil {
		w.retire()
	}
	return n - 1, nil
}

// check looks at the workers every second (more often under a short
// timeout): one silent for silentAfter is picked last; one silent for the
// pool's timeout (stopped, frozen) is killed, its requests answered 504
// (supervise), and replaced; one grown past maxRSS is replaced.
func (p *Pool) check() {
	every := min(time.Second, p.cfg.Timeout/4)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stopped:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		for i := range p.inUse() {
			w := p.slots[i].Load()
			if w == nil || w.gone.Load() || w.stopping.Load() {
				continue
			}
			silence := time.Duration(now - w.heard.Load())
			w.silent.Store(silence >= min(silentAfter, p.cfg.Timeout/2))
			if silence >= p.cfg.Timeout && w.timedOut.CompareAndSwap(false, true) {
				p.log().Error("ruvoy: a worker stopped reporting (stopped or frozen): killing it, its requests get 504",
					zap.Int("worker", i), zap.Int("pid", w.proc.Pid), zap.Duration("silent_for", silence),
					zap.Int64("requests", w.inflight.Load()))
				w.proc.Kill()
				continue
			}
			if p.cfg.MaxRSS > 0 {
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
func (p *Pool) overRSS(w *Handle, rss uint64, measure string) {
	if w.replacing.CompareAndSwap(false, true) {
		p.log().Warn("ruvoy: a worker grew past --worker-max-rss: replacing it",
			zap.Int("worker", w.slot), zap.Int("pid", w.proc.Pid), zap.Uint64(measure, rss), zap.Uint64("max_bytes", p.cfg.MaxRSS))
		go p.replace(w.slot)
	}
	alone := true
	for i := range p.inUse() {
		if o := p.slots[i].Load(); o != nil && o != w && !o.retiring.Load() && !o.gone.Load() && !o.replacing.Load() {
			alone = false
		}
	}
	if !alone || rss > p.cfg.MaxRSS+p.cfg.MaxRSS/8 {
		w.retire()
	}
}

// Stop ends the pool's workers: each finishes or unwinds its requests
// (the runtime's Shutdown in the worker) and exits. It returns the highest
// exit status among them, once all have exited.
func (p *Pool) Stop() int {
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
	if p.cfg.Template != nil {
		p.tmplMu.Lock()
		p.tmpl.stop()
		p.tmplMu.Unlock()
	}
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

// Each calls f with each slot's number and the worker serving it (nil
// while one starts), and the restarts of the slot so far.
func (p *Pool) Each(f func(slot int, w *Handle, restarts int64)) {
	for i := range p.inUse() {
		f(i, p.slots[i].Load(), p.slotSt[i].restarts.Load())
	}
}
