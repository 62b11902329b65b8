package frontend

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// A Handle is the front end's handle of one worker process: the way to
// the VM its requests run in (the request path's link: Start, Submit,
// Cancel, Interrupt, Hijacked), and the reader that hands what its VM
// sends to the Router.
type Handle struct {
	pool    *Pool
	slot    int
	proc    *os.Process
	conn    *net.UnixConn
	out     *frameWriter
	urgent  *frameWriter // interrupts and the stop again, for a held VM (internal/cluster/worker's listenUrgent)
	started time.Time

	mu       sync.Mutex
	streams  map[uint64]struct{} // requests it runs (until their FINAL)
	inflight atomic.Int64

	gone      atomic.Bool              // it exited: its requests have failed
	heard     atomic.Int64             // when it last reported (RV_WORKER_STATS), unix ns
	silent    atomic.Bool              // it has not reported for a while (Pool.check)
	timedOut  atomic.Bool              // it was killed for not reporting: its requests get 504
	heldSince atomic.Int64             // when Ruby code took its VM thread (RV_WORKER_HELD), unix ns; 0: not held
	retiring  atomic.Bool              // it takes no new request, and stops once its requests end
	replacing atomic.Bool              // a new worker is starting to take its slot
	stopping  atomic.Bool              // it was told to stop: its exit is expected
	bootError atomic.Bool              // its app failed to load: its exit is expected, and the error said
	stats     atomic.Pointer[stats.VM] // what it last reported

	statm *os.File     // its /proc statm, open while it runs (with a max RSS)
	rssMu sync.Mutex   // one read of statm at a time
	pssAt int64        // when PSS was last read (UnixNano; under rssMu)
	rssAt atomic.Int64 // when its memory was last read, unix ns

	ready    chan bootResult
	readDone chan struct{}
}

type bootResult struct{ err error }

// Slot is the worker's place in its pool, which a replacement takes.
func (w *Handle) Slot() int { return w.slot }

// Stats is what the worker last reported, or nil.
func (w *Handle) Stats() *stats.VM { return w.stats.Load() }

// InFlight is how many requests the worker runs.
func (w *Handle) InFlight() int64 { return w.inflight.Load() }

// Held says whether Ruby code holds the worker's VM thread (it said so).
func (w *Handle) Held() bool { return w.heldSince.Load() != 0 }

// HeldFor is how long Ruby code has held the worker's VM thread, from
// when the worker said so (rv_held.c: once a hold passes 10 ms); 0: not held.
func (w *Handle) HeldFor() time.Duration {
	if since := w.heldSince.Load(); since != 0 {
		return max(time.Duration(time.Now().UnixNano()-since), 0)
	}
	return 0
}

// Silence is how long since the worker last reported (it does every
// cluster.StatsEvery, from a thread its app does not hold).
func (w *Handle) Silence() time.Duration {
	return max(time.Duration(time.Now().UnixNano()-w.heard.Load()), 0)
}

// Start hands the worker a new request (app: the app it runs); false when
// the worker is gone and the request never reached it.
func (w *Handle) Start(stream, app uint64, head []byte) bool {
	w.mu.Lock()
	if w.gone.Load() { // read under mu: fail sweeps what was added before
		w.mu.Unlock()
		return false
	}
	w.streams[stream] = struct{}{}
	w.inflight.Add(1)
	w.mu.Unlock()
	// Should the worker die now, fail has ended the request already and
	// the frame is dropped.
	w.out.send(wire.InRequest, stream, 0, app, head)
	return true
}

// Submit sends the worker's VM a message for a request.
func (w *Handle) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	w.out.send(kind, stream, flags, aux, payload)
}

// Cancel tells the worker's VM that Go is done with a request.
func (w *Handle) Cancel(stream uint64, flags uint32) {
	w.out.send(wire.InCancel, stream, flags, 0, nil)
}

// Interrupt goes on the socket, in order with the request's other
// frames, and on the urgent socket, which reaches a VM thread that Ruby code
// holds: the first to find the request raises, once (rv_interrupt.c).
func (w *Handle) Interrupt(stream uint64, reason uint32) {
	w.out.send(wire.InInterrupt, stream, 0, uint64(reason), nil)
	w.urgent.send(wire.InInterrupt, stream, 0, uint64(reason), nil)
}

// Hijacked sends the worker a hijacked connection: the descriptor
// crosses with its frame (SCM_RIGHTS) and is closed here.
func (w *Handle) Hijacked(stream uint64, fd int, flags uint32) {
	w.out.addFile(wire.Frame{Kind: wire.InHijacked, Stream: stream, Flags: flags}, nil, fd)
	w.out.flush()
}

// finished says the worker's VM is done with stream.
func (w *Handle) finished(stream uint64) {
	w.mu.Lock()
	_, ok := w.streams[stream]
	delete(w.streams, stream)
	w.mu.Unlock()
	if ok && w.pool.cfg.MaxRSS > 0 {
		w.checkRSS()
	}
	if ok && w.inflight.Add(-1) == 0 && w.retiring.Load() {
		w.stop()
	}
}

// checkRSS reads the worker's resident memory, at most every rssEvery,
// and has it replaced once past the pool's maxRSS (overRSS): a request's
// end is when an app that leaks has grown, so a leak is caught within
// about what rssEvery of requests adds.
func (w *Handle) checkRSS() {
	now := time.Now().UnixNano()
	if now-w.rssAt.Load() < int64(rssEvery) || w.retiring.Load() || !w.rssMu.TryLock() {
		return
	}
	defer w.rssMu.Unlock()
	w.rssAt.Store(now)
	if w.statm == nil {
		return // it exited
	}
	var b [64]byte
	n, _ := w.statm.ReadAt(b[:], 0)
	rss := cluster.StatmRSS(b[:n])
	if rss <= w.pool.cfg.MaxRSS {
		return
	}
	if w.pool.cfg.Template == nil {
		w.pool.overRSS(w, rss, "rss_bytes")
		return
	}
	// Forked (--preload), its RSS counts in full the pages it shares with
	// the template and the other workers; its PSS, their share. PSS costs
	// a walk of its page tables: read at most every pssEvery.
	if now-w.pssAt < int64(pssEvery) {
		return
	}
	w.pssAt = now
	if pss := cluster.PSS(w.proc.Pid); pss > w.pool.cfg.MaxRSS {
		w.pool.overRSS(w, pss, "pss_bytes")
	}
}

// retire takes the worker out of the rotation; it stops once its
// requests have ended.
func (w *Handle) retire() {
	w.retiring.Store(true)
	if w.inflight.Load() == 0 {
		w.stop()
	}
}

// stop tells the worker to stop (RV_IN_STOP), once.
func (w *Handle) stop() {
	if !w.stopping.CompareAndSwap(false, true) {
		return
	}
	if w.replacing.Load() && w.pool.cfg.MaxRSS > 0 {
		w.pool.log().Info("ruvoy: a worker replaced for its memory stops", zap.Int("worker", w.slot),
			zap.Int("pid", w.proc.Pid), zap.Uint64("peak_rss_bytes", cluster.PeakRSS(w.proc.Pid)))
	}
	w.out.send(wire.InStop, 0, 0, 0, nil)
	w.out.finish()
	w.urgent.send(wire.InStop, 0, 0, 0, nil)
	w.urgent.finish()
	time.AfterFunc(stopWait, func() {
		select {
		case <-w.readDone:
		default:
			w.pool.log().Error("ruvoy: a worker did not stop in time: killing it", zap.Int("worker", w.slot), zap.Int("pid", w.proc.Pid))
		}
		w.proc.Kill() // after Wait returned, this fails harmlessly
	})
}

// read hands what the worker sends to the streams until its socket ends.
func (w *Handle) read() {
	defer close(w.readDone)
	fr := newFrameReader(w.conn)
	defer fr.closeFDs()
	in := bufio.NewReaderSize(fr, 64<<10)
	router := w.pool.cfg.Router
	var hdr [wire.FrameHeader]byte
	var err error
	var chain, last *msg.Msg // read, not yet routed
	for {
		if chain != nil && !frameBuffered(in) {
			router.Route(chain)
			chain, last = nil, nil
		}
		var f wire.Frame
		if f, err = wire.ReadFrame(in, &hdr); err != nil {
			break
		}
		if f.Kind >= wire.WorkerConfig {
			p := make([]byte, f.Len)
			if _, err = io.ReadFull(in, p); err != nil {
				break
			}
			w.control(f, p)
			continue
		}
		m := msg.New(f.Kind, f.Stream, f.Flags, f.Aux, int(f.Len))
		if _, err = io.ReadFull(in, m.Payload()); err != nil {
			m.Free()
			break
		}
		if f.Kind == wire.OutFile {
			wire.SetResponseFD(m.Payload(), int32(fr.takeFD()))
		}
		if f.Flags&wire.FlagFinal != 0 {
			w.finished(f.Stream)
		}
		switch f.Kind {
		case wire.OutLog:
			router.Log(m, zap.Int("worker", w.slot))
			m.Free()
		case wire.OutReply:
			m.Free() // a worker answers its own control messages
		default:
			// What came in one read goes on as one chain, as the local
			// VM's batch does: a handler takes a head and the reset that
			// follows it together.
			if last != nil {
				last.SetNext(m)
			} else {
				chain = m
			}
			last = m
		}
	}
	if chain != nil {
		router.Route(chain)
	}
	// A reset is how the socket of a process that died with unread bytes
	// ends: supervise says why it died.
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !w.stopping.Load() {
		w.pool.log().Error("ruvoy: reading from a worker failed: killing it", zap.Int("worker", w.slot), zap.Error(err))
		w.proc.Kill()
	}
}

// frameBuffered says whether a whole frame waits in in, to be read
// without waiting for the worker.
func frameBuffered(in *bufio.Reader) bool {
	if in.Buffered() < wire.FrameHeader {
		return false
	}
	h, _ := in.Peek(wire.FrameHeader)
	return in.Buffered() >= wire.FrameHeader+int(wire.FrameLen(h))
}

// control takes a frame of the worker's own kinds.
func (w *Handle) control(f wire.Frame, p []byte) {
	switch f.Kind {
	case wire.WorkerReady:
		var r bootResult
		if f.Aux != 1 {
			r.err = &BootError{Message: string(p)}
			w.bootError.Store(true)
		}
		select {
		case w.ready <- r:
		default:
		}
	case wire.WorkerHeld:
		var since int64
		if f.Aux == 1 {
			since = time.Now().UnixNano()
		}
		w.heldSince.Store(since)
	case wire.WorkerStats:
		w.heard.Store(time.Now().UnixNano())
		if s, ok := stats.Read(p); ok {
			w.stats.Store(&s)
		}
	}
}

// supervise waits for the worker's process to end, fails the requests it
// still ran, and tells the pool.
func (w *Handle) supervise() {
	p := w.pool
	defer p.live.Done()
	state, waitErr := w.proc.Wait()
	waited(w.proc.Pid)
	if waitErr == nil && !state.Success() {
		waitErr = errors.New(state.String())
	}
	select {
	case <-w.readDone:
	case <-time.After(time.Second): // a child of the worker still holds the socket
		w.conn.Close()
		<-w.readDone
	}
	w.conn.Close()
	w.out.close()
	w.urgent.close()
	w.urgent.conn.Close()
	if w.statm != nil {
		w.rssMu.Lock()
		w.statm.Close()
		w.statm = nil
		w.rssMu.Unlock()
	}
	status := http.StatusBadGateway
	if w.timedOut.Load() {
		status = http.StatusGatewayTimeout
	}
	failed := w.fail(status)
	select {
	case w.ready <- bootResult{fmt.Errorf("ruvoy: worker %d exited while its app loaded (%v)", w.slot, waitErr)}:
	default:
	}
	code := -1
	if state != nil {
		code = state.ExitCode()
	}
	if code < 0 {
		code = exitKilled
	}
	if w.stopping.Load() {
		p.mu.Lock()
		p.codes = append(p.codes, code)
		p.mu.Unlock()
	} else if !w.bootError.Load() {
		cause := exitCause(waitErr)
		if w.timedOut.Load() {
			cause = "killed: it stopped reporting"
		}
		var hijacked int
		if s := w.stats.Load(); s != nil {
			hijacked = s.Hijacked
		}
		p.log().Error("ruvoy: a worker exited", zap.Int("worker", w.slot), zap.Int("pid", w.proc.Pid),
			zap.String("cause", cause), zap.Int("requests_failed", failed), zap.Int("status", status),
			zap.Int("hijacked_connections_lost", hijacked))
	}
	p.exited(w)
}

// fail ends the requests the worker still ran, as the VM would have
// ended them had it failed: status (502, or 504 for a worker killed for
// not reporting) when nothing was sent yet, else a cut. The worker's
// reader is done: nothing of it comes after.
func (w *Handle) fail(status int) int {
	w.gone.Store(true)
	w.mu.Lock()
	ids := w.streams
	w.streams = map[uint64]struct{}{}
	w.mu.Unlock()
	w.inflight.Store(0)
	for id := range ids {
		w.pool.cfg.Router.Route(msg.New(wire.OutReset, id, wire.FlagEnd|wire.FlagFinal, uint64(status), 0))
	}
	return len(ids)
}

func exitCause(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// exitKilled is the status a worker killed by a signal counts as: the
// runtime's "the VM was held and could not be stopped" (docs/cli.md).
const exitKilled = 4
