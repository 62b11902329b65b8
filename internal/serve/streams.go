package serve

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A stream is one request's Go-side state: the messages the VM sent it that
// its handler has not taken yet. Streams live in a table; a stream id is
// its index there in its low 32 bits and the index's use count above, so a
// message for a request that ended never reaches the next one at the same
// index.
//
// Two parties hold a stream: the handler goroutine and the VM. Each drops
// its reference when done (the VM with its FINAL message); the last one
// frees its index. A request whose client left thus keeps its index, and its
// admission, until Ruby is done with it.
type stream struct {
	mu       sync.Mutex
	id       uint64 // 0 while free
	uses     uint32
	head     *msg.Msg
	tail     *msg.Msg
	detached bool // the handler is gone: what arrives is dropped
	method   string
	path     string
	app      *App
	vm       vmLink // where the request runs
	req      *http.Request
	calls    map[uint64]context.CancelCauseFunc // upstream calls under way
	refs     atomic.Int32
	onFree   func()      // releases the request's admission
	timer    *time.Timer // its request timeout, stopped when it ends
	notify   chan struct{}

	// Request body flow control: bytes sent to the VM, and bytes the app
	// has taken so far; the difference, and what rack.input keeps of what
	// was taken, count against the body budget.
	hasBody    bool // it holds a working set of the body budget (admission)
	bodySent   atomic.Int64
	bodyTaken  atomic.Int64
	bodyNotify chan struct{}
	orphanOf   *connInfo // the connection whose client left it, while Ruby unwinds it
}

type streams struct {
	mu   sync.Mutex
	free []uint32 // a stack: recently used streams are reused first
	all  []atomic.Pointer[stream]
}

func newStreams(n int) *streams {
	s := &streams{free: make([]uint32, n), all: make([]atomic.Pointer[stream], n)}
	for i := range s.free {
		s.free[i] = uint32(n - 1 - i)
	}
	return s
}

// acquire takes a free index for a new request, or returns nil.
func (s *streams) acquire(q *request) *stream {
	s.mu.Lock()
	if len(s.free) == 0 {
		s.mu.Unlock()
		return nil
	}
	index := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.mu.Unlock()

	st := s.all[index].Load()
	if st == nil {
		st = &stream{notify: make(chan struct{}, 1), bodyNotify: make(chan struct{}, 1)}
		s.all[index].Store(st)
	}
	st.mu.Lock()
	st.uses++
	st.id = uint64(st.uses)<<32 | uint64(index)
	st.detached = false
	st.method, st.path = q.r.Method, q.r.URL.Path
	st.app, st.req, st.vm = q.app, q.r, q.link
	st.hasBody = q.hasBody
	st.onFree = q.release
	st.mu.Unlock()
	st.refs.Store(2)
	st.bodySent.Store(0)
	st.bodyTaken.Store(0)
	return st
}

// lookup returns the stream an id names, locked, or nil.
func (s *streams) lookup(id uint64) *stream {
	index := uint32(id)
	if int(index) >= len(s.all) {
		return nil
	}
	st := s.all[index].Load()
	if st == nil {
		return nil
	}
	st.mu.Lock()
	if st.id != id {
		st.mu.Unlock()
		return nil
	}
	return st
}

// deliver hands the VM's messages for one stream to it: m and those
// chained after it (a run, Runtime.Route). A run is queued whole, so
// that its handler takes together what came together: a head and the
// reset that follows it at once become one 500, not a head and a cut.
func (s *streams) deliver(m *msg.Msg) {
	st := s.lookup(uint64(m.Stream()))
	if st == nil {
		dropRun(m)
		return
	}
	if m.Kind() == wire.OutCredit {
		a := st.app
		st.mu.Unlock()
		n := int64(m.Aux())
		taken := st.bodyTaken.Add(n)
		if a != nil {
			// n bytes left the window; rack.input kept them, or moved all it
			// kept to a file.
			a.admit.body.release(n - (keptFor(taken) - keptFor(taken-n)))
		}
		signal(st.bodyNotify)
		m.Free()
		return
	}
	final, last := false, m
	for c := m; c != nil; c = c.Next() {
		final = final || c.Flags()&wire.FlagFinal != 0
		last = c
	}
	if st.detached {
		dropRun(m)
	} else {
		if st.tail != nil {
			st.tail.SetNext(m)
		} else {
			st.head = m
		}
		st.tail = last
	}
	st.mu.Unlock()
	signal(st.notify)
	if final {
		s.unref(st)
	}
}

// startUpstream runs an upstream call the VM asked for, on a goroutine.
func (s *streams) startUpstream(m *msg.Msg) {
	id, call := uint64(m.Stream()), uint64(m.Aux())
	p := append([]byte(nil), m.Payload()...)
	m.Free()
	st := s.lookup(id)
	if st == nil {
		return // the request is over
	}
	a, r, l := st.app, st.req, st.vm
	st.mu.Unlock()
	if a == nil || a.opts.Upstream == nil || a.opts.Upstream.Caller == nil {
		replyUpstream(l, id, call, nil, &UpstreamError{"upstream calls are not configured for this app"})
		return
	}
	go a.upstream(upstreamCall{st: st, link: l, origin: r, id: id, call: call, payload: p})
}

// cancelUpstream stops a call whose caller stopped waiting.
func (s *streams) cancelUpstream(m *msg.Msg) {
	id, call := uint64(m.Stream()), uint64(m.Aux())
	m.Free()
	if st := s.lookup(id); st != nil {
		cancel := st.calls[call]
		st.mu.Unlock()
		if cancel != nil {
			cancel(errCallerStopped)
		}
	}
}

// addCall records a call under way; false when the request is over: the
// VM is done with it, or its handler is (the call is then cancelled at once).
func (st *stream) addCall(id, call uint64, cancel context.CancelCauseFunc) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.id != id {
		return false
	}
	if st.detached {
		cancel(errRequestOver)
		return true
	}
	if st.calls == nil {
		st.calls = map[uint64]context.CancelCauseFunc{}
	}
	st.calls[call] = cancel
	return true
}

func (st *stream) removeCall(call uint64) {
	st.mu.Lock()
	delete(st.calls, call)
	st.mu.Unlock()
}

func (st *stream) setTimer(t *time.Timer) {
	st.mu.Lock()
	st.timer = t
	st.mu.Unlock()
}

// take returns the stream's pending messages in order.
func (st *stream) take() *msg.Msg {
	st.mu.Lock()
	m := st.head
	st.head, st.tail = nil, nil
	st.mu.Unlock()
	return m
}

// orphan counts a request whose client left against its connection (and
// the runtime's gauge) until Ruby is done with it.
func (s *streams) orphan(st *stream, c *connInfo) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if c == nil || st.orphanOf != nil || st.id == 0 || st.app == nil {
		return
	}
	st.orphanOf = c
	c.orphans.Add(1)
	st.app.rt.counters.orphans.Add(1)
}

// detach says the handler is gone, drops what waits for it and ends the
// upstream calls under way.
func (s *streams) detach(st *stream) {
	st.mu.Lock()
	st.detached = true
	m := st.head
	st.head, st.tail = nil, nil
	for _, cancel := range st.calls {
		cancel(errRequestOver)
	}
	st.mu.Unlock()
	for m != nil {
		next := m.Next()
		dropMsg(m)
		m = next
	}
	s.unref(st)
}

func (s *streams) unref(st *stream) {
	if st.refs.Add(-1) != 0 {
		return
	}
	st.mu.Lock()
	index := uint32(st.id)
	st.id = 0
	onFree := st.onFree
	st.onFree = nil
	if st.app != nil && st.hasBody {
		taken := st.bodyTaken.Load()
		st.app.admit.body.release(st.bodySent.Load() - taken + keptFor(taken) + bodyWorkingSet)
	}
	if st.orphanOf != nil {
		st.orphanOf.orphans.Add(-1)
		st.app.rt.counters.orphans.Add(-1)
		st.orphanOf = nil
	}
	st.app, st.req, st.vm = nil, nil, nil
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	st.mu.Unlock()
	if onFree != nil {
		onFree()
	}
	s.mu.Lock()
	s.free = append(s.free, index)
	s.mu.Unlock()
}

// inUse is how many indexes are taken.
func (s *streams) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all) - len(s.free)
}

// describe names the request a stream id belongs to, for log entries.
func (s *streams) describe(id uint64) (method, path string, ok bool) {
	st := s.lookup(id)
	if st == nil {
		return "", "", false
	}
	method, path = st.method, st.path
	st.mu.Unlock()
	return method, path, true
}

// dropMsg frees a message nobody will handle, closing a file it carries.
func dropMsg(m *msg.Msg) {
	if m.Kind() == wire.OutFile {
		if _, fd, _, _, ok := wire.ResponseStart(m.Payload()); ok && fd >= 0 {
			syscall.Close(int(fd))
		}
	}
	m.Free()
}

// dropRun drops m and the messages chained after it.
func dropRun(m *msg.Msg) {
	for m != nil {
		next := m.Next()
		dropMsg(m)
		m = next
	}
}

// signal wakes whoever waits on c, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
