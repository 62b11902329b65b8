package ruvoy

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// AppOptions configure one loaded app.
type AppOptions struct {
	MaxRequests int // requests admitted to Ruby at once (default 1024)
	// MaxRequestsPerConnection bounds the requests one HTTP/2 or HTTP/3
	// connection has in Ruby at once; more wait for one of them to end
	// (default: 100, at most a quarter of MaxRequests).
	MaxRequestsPerConnection int
	// MaxRequestsPerClient bounds the requests one client address (an
	// IPv6 one by its /64; ClientIP names it) has in Ruby at once, across
	// its connections; more are refused as over MaxRequests are (default:
	// a quarter of MaxRequests, at least 64; MaxRequests or more: none).
	MaxRequestsPerClient int
	QueueTimeout         time.Duration // how long a request over MaxRequests may wait (default 0)
	MaxBodyBytes         int64         // request bodies over this get 413 (0: no limit)
	// RequestTimeout, when set, bounds the time a request spends in Ruby:
	// past it, Ruvoy::RequestTimeout is raised in its fiber (503).
	RequestTimeout time.Duration
	// MaxInflightBodyBytes bounds request body bytes held in memory across
	// the app's requests (default 64 MiB; -1: no limit).
	MaxInflightBodyBytes int64
	RequestWindow        int64 // request body bytes read ahead of the app (default 256 KiB)
	ResponseWindow       int64 // response bytes in flight per request (default: the runtime's)
	// Context, when set, gives the app env["ruvoy.context"].
	Context *ContextOptions
	// Upstream, when set, gives the app env["ruvoy.upstream"].
	Upstream *UpstreamOptions
	// SendfileDirs are the directories an X-Sendfile or X-Accel-Redirect
	// response header may name a file in; none: the headers pass through.
	SendfileDirs []string
	// Trusted reports whether r came from a trusted proxy: only then do
	// X-Forwarded-* headers reach the app (and X-Forwarded-Proto set
	// rack.url_scheme). nil: never.
	Trusted func(r *http.Request) bool
	// ClientIP names the client for REMOTE_ADDR (Caddy passes its client_ip,
	// which honours trusted proxies); nil uses the connection's address.
	ClientIP func(*http.Request) string
	// ScriptName gives SCRIPT_NAME: where a server in front mounted the
	// app, the part of the path it stripped (Caddy's handle_path).
	ScriptName func(*http.Request) string
	// RemoteUser gives REMOTE_USER: the user a server in front
	// authenticated (Caddy's basic_auth), or "".
	RemoteUser func(*http.Request) string
	// Workers, when above 0, runs the app in that many worker processes
	// (cluster mode, workers.go) instead of this process's VM.
	Workers int
	// OnWorker, in cluster mode, hears which worker (its slot) serves r:
	// Caddy's access log names it.
	OnWorker func(r *http.Request, slot int)
	// WorkerMaxRSS replaces a worker whose resident memory grows past it
	// (bytes; 0: never).
	WorkerMaxRSS int64
	// WorkerTimeout is how long a worker may go without reporting before
	// it is killed and its requests get 504 (default 30s).
	WorkerTimeout time.Duration
	// Preload forks the workers from a template process that booted the
	// app once (docs/cluster-memory.md).
	Preload bool
	// WriteTimeout is the server's: a write to the client that does not
	// finish within it fails (Caddy's write_idle_timeout). ruvoy counts and
	// logs the responses it cut (writetimeout.go); 0: none.
	WriteTimeout time.Duration
	// WriteChunk is the size of the pieces the server's writer cuts a copy
	// into so that its write timeout applies between them (Caddy's
	// max_write_chunk); file bodies keep sendfile(2) under it
	// (internal/conn's CopyFile). 0: none.
	WriteChunk int64
	// EarlyHintsHTTP1 sends the app's 103 Early Hints to HTTP/1.1
	// clients too, not only to HTTP/2 and HTTP/3 ones (earlyhints.go).
	EarlyHintsHTTP1 bool
}

const (
	defaultMaxRequests   = 1024
	defaultRequestWindow = 256 << 10
	defaultBodyBudget    = 64 << 20
)

// App is a loaded rackup: an http.Handler that runs requests in the VM.
type App struct {
	rt           *Runtime
	id           uint64
	opts         AppOptions
	admit        *admission
	sendfileDirs []sendfileDir
	sendfileTold atomic.Bool // unsentFile
	closed       atomic.Bool
	pool         *frontend.Pool // cluster mode: the workers it runs in; nil: this process's VM

	inflight atomic.Int64 // requests inside ServeHTTP
	lone     atomic.Int32 // requests in a row that arrived to find no other in flight
	draining atomic.Bool  // closed for unloadDelay: unload once idle
	unloaded atomic.Bool
}

// unloadDelay is how long a closed app stays in the VM. On a reload Caddy
// cleans up the old config's handlers once its old servers have begun to
// shut down, not finished: a request such a server read just before may
// reach this handler after Close, and must still find its app.
const unloadDelay = 10 * time.Second

func newApp(rt *Runtime, id uint64, o AppOptions, dirs []sendfileDir) *App {
	if o.MaxRequests <= 0 {
		o.MaxRequests = defaultMaxRequests
	}
	if o.MaxRequestsPerConnection <= 0 {
		o.MaxRequestsPerConnection = max(1, min(defaultPerConn, o.MaxRequests/4))
	}
	if o.MaxRequestsPerClient <= 0 {
		o.MaxRequestsPerClient = min(o.MaxRequests, max(defaultPerClient, o.MaxRequests/4))
	}
	if o.RequestWindow <= 0 {
		o.RequestWindow = defaultRequestWindow
	}
	if o.MaxInflightBodyBytes == 0 {
		o.MaxInflightBodyBytes = defaultBodyBudget
	}
	if u := o.Upstream; u != nil {
		if u.Timeout <= 0 {
			u.Timeout = defaultUpstreamTimeout
		}
		if u.MaxResponseBytes <= 0 {
			u.MaxResponseBytes = defaultUpstreamMaxBytes
		}
	}
	return &App{rt: rt, id: id, opts: o, sendfileDirs: dirs,
		admit: newAdmission(o.MaxRequests, o.MaxRequestsPerConnection, o.MaxRequestsPerClient, o.QueueTimeout, o.MaxInflightBodyBytes, &rt.counters)}
}

// RequestsPerConnection is the most requests one HTTP/2 or HTTP/3
// connection may have in the app at once.
func (a *App) RequestsPerConnection() int { return a.opts.MaxRequestsPerConnection }

// Close drops the app: it no longer counts as serving at once, and leaves
// the VM after unloadDelay, once no request of it is in flight (requests in
// the VM hold the app themselves).
func (a *App) Close() {
	if a.closed.CompareAndSwap(false, true) {
		a.rt.apps.Add(-1)
		time.AfterFunc(unloadDelay, func() {
			a.draining.Store(true)
			a.unloadIfIdle()
		})
	}
}

func (a *App) unloadIfIdle() {
	if a.draining.Load() && a.inflight.Load() == 0 && a.unloaded.CompareAndSwap(false, true) {
		if a.pool != nil {
			go a.rt.stopPool(a.pool)
		} else {
			a.rt.control(wire.InUnloadApp, a.id, nil)
		}
		closeSendfileDirs(a.sendfileDirs)
	}
}

// link is the VM a new request goes to: this process's, or the worker
// that has the fewest requests in flight; false when no worker serves,
// nor began to within workerWait.
func (a *App) link(r *http.Request) (vmLink, bool) {
	if a.pool == nil {
		return localVM{}, true
	}
	w := a.pool.Pick()
	if w == nil {
		w = a.pool.Await(r)
	}
	return w, w != nil
}

func (a *App) requestDone() {
	if a.inflight.Add(-1) == 0 {
		a.unloadIfIdle()
	}
}

var headPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	alone := a.arrive()
	defer a.requestDone()
	// Caddy names itself; ruvoy sends no Server header unless the app does.
	delete(w.Header(), "Server")
	requestID(r)
	if a.opts.MaxBodyBytes > 0 && r.ContentLength > a.opts.MaxBodyBytes {
		refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	cn := connOf(r)
	remote := a.clientAddress(r)
	release, ok := a.admit.admit(w, r, cn, remote, hasBody)
	if !ok {
		return
	}
	l, ok := a.link(r)
	if w, isWorker := l.(*frontend.Worker); isWorker && w != nil && a.opts.OnWorker != nil {
		a.opts.OnWorker(r, w.Slot())
	}
	if !ok {
		release()
		if hasBody {
			a.admit.body.release(bodyWorkingSet)
		}
		noWorker(w, r)
		return
	}
	st := a.rt.streams.acquire(a, r, hasBody, release, l)
	if st == nil {
		release()
		if hasBody {
			a.admit.body.release(bodyWorkingSet)
		}
		overloaded(w, r)
		return
	}
	st.mu.Lock()
	id := st.id
	st.mu.Unlock()

	bufp := headPool.Get().(*[]byte)
	var context []byte
	if a.opts.Context != nil {
		context = a.opts.Context.contextJSON(r)
	}
	trusted := a.opts.Trusted != nil && a.opts.Trusted(r)
	var mounted headMount
	if a.opts.ScriptName != nil {
		mounted.scriptName = a.opts.ScriptName(r)
	}
	if a.opts.RemoteUser != nil {
		mounted.remoteUser = a.opts.RemoteUser(r)
	}
	head, ok := encodeHead((*bufp)[:0], r, remote, r.TLS != nil, trusted, hasBody, uint32(a.opts.ResponseWindow), context, mounted, a.opts.EarlyHintsHTTP1)
	if !ok {
		*bufp = head[:0]
		headPool.Put(bufp)
		a.rt.streams.detach(st)
		a.rt.streams.unref(st) // the VM never saw it
		http.Error(w, "Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
		return
	}
	direct := claimDirect(l, id, hasBody, alone)
	if direct >= 0 {
		a.rt.counters.direct.Add(1)
	}
	started := l.Start(id, a.id, head)
	*bufp = head[:0]
	headPool.Put(bufp)
	if !started {
		if direct >= 0 {
			a.rt.releaseDirect(direct)
		}
		a.rt.streams.detach(st)
		a.rt.streams.unref(st) // the VM never saw it
		noWorker(w, r)
		return
	}
	if t := a.opts.RequestTimeout; t > 0 {
		// It runs until Ruby is done with the request, even if the client left.
		st.setTimer(time.AfterFunc(t, func() { l.Interrupt(id, wire.IntrTimeout) }))
	}

	rs := &responder{w: w, req: r, sendfileDirs: a.sendfileDirs, sendfileTold: &a.sendfileTold, log: a.logPath, rt: a.rt, link: l, id: id, writeChunk: a.opts.WriteChunk}
	if hasBody {
		rs.rc = http.NewResponseController(w)
		_ = rs.rc.EnableFullDuplex() // HTTP/1: let the app answer while the body still arrives
		rs.pump = startPump(st, l, id, r.Body, a.opts.RequestWindow, a.opts.MaxBodyBytes, a.admit.body, rs.rc)
	}
	a.serve(r, rs, st, l, id, cn, release, direct)
}

// serve writes what the VM sends until the response ends or the client
// goes away. With a direct slot (>= 0) it first waits for the VM's messages
// on its own thread (direct.go).
func (a *App) serve(r *http.Request, rs *responder, st *stream, l vmLink, id uint64, cn *connInfo, release func(), direct int) {
	var cancel uint32  // the VM is told to give up: 0, or wire.FlagError / wire.FlagMalformed
	closeConn := false // HTTP/1: end the connection after the response
	defer func() {
		if direct >= 0 {
			a.rt.releaseDirect(direct)
		}
		if rs.pump != nil {
			rs.pump.finish()
		}
		if cancel != 0 {
			l.Cancel(id, cancel&wire.FlagMalformed)
		}
		if cancel&wire.FlagError != 0 {
			// Its client left: its place goes to the next request now, and
			// what Ruby still unwinds counts against its connection.
			release()
			a.rt.streams.orphan(st, cn)
		}
		if rs.refused == http.StatusRequestTimeout {
			a.rt.log().Warn("ruvoy: a request body arrived too slowly (the server's read_min_rate or read_idle_timeout): answered 408",
				zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Int64("received", st.bodySent.Load()))
		}
		a.rt.streams.detach(st)
		switch {
		case rs.reset && cancel&wire.FlagError == 0:
			rs.cut() // a body cut short must look cut short
		case closeConn:
			rs.closeConnection()
		}
	}()
	client := conn.WatchClient(r, cn.plumbing())
	var bodyFailed <-chan struct{}
	if rs.pump != nil {
		bodyFailed = rs.pump.failed
	}
	unflushed := false    // written, not yet flushed: a flush waits until nothing more is at hand
	flushed := false      // the head is out: how the body is framed is settled
	var writing time.Time // when the write under way began
	failed := func() {    // a write to the client failed
		cancel = wire.FlagError
		if stalled(rs.writeErr, time.Since(writing), a.opts.WriteTimeout) {
			a.rt.writeCuts.cut(a.rt, r, rs.sent, a.opts.WriteTimeout)
		}
	}
	for {
		m := st.take()
		if m == nil && unflushed && !flushed && direct >= 0 && a.rt.pollDirect(direct) {
			continue // more came while this thread yielded: same flush
		}
		if m == nil && unflushed {
			unflushed, flushed = false, true
			writing = time.Now()
			n, err := rs.flush()
			if err != nil {
				failed()
				return
			}
			if n > 0 {
				l.Submit(wire.InCredit, id, 0, uint64(n), nil)
			}
		}
		if m == nil && direct >= 0 {
			if !a.rt.waitDirect(direct) {
				direct = -1
			}
			continue
		}
		if m == nil {
			select {
			case <-st.notify:
				continue
			case <-client.Fin:
				client.FinSeen()
				continue
			case <-client.Probe:
				if !rs.wroteHead {
					client.SendProbe(rs.w)
				}
				continue
			case <-client.Gone:
				cancel = wire.FlagError
				return
			case <-bodyFailed:
				bodyFailed = nil
				state := rs.pump.ended()
				if state == bodyGone {
					cancel = wire.FlagError
					return
				}
				if rs.wroteHead {
					rs.reset = true // the head is out: cut the response
				} else {
					rs.answer(statusForBody(state), true)
					closeConn = r.ProtoMajor == 1
				}
				cancel = wire.FlagMalformed
				return
			}
		}
		writing = time.Now()
		err := rs.write(m)
		if rs.hijacked {
			release() // the request is over; the connection is the app's
			return
		}
		if err != nil {
			failed()
			if rs.wantDone {
				l.Submit(wire.InDone, id, wire.FlagError, 0, nil)
			}
			return
		}
		if rs.refused != 0 {
			// The request body was at fault: 400 went out instead of the
			// app's answer, and the app hears why.
			cancel = wire.FlagMalformed
			closeConn = r.ProtoMajor == 1
			return
		}
		if rs.ended || rs.reset {
			break
		}
		unflushed = rs.wroteHead
	}
	if !rs.wroteHead && !rs.reset {
		a.rt.log().Error("ruvoy: the VM ended a response without a head", zap.String("path", r.URL.Path))
		rs.answer(http.StatusInternalServerError, false)
	}
	// On HTTP/1 the bytes after a request's body are the next request: an
	// app that answered without the whole body has the rest read and
	// dropped, and a body that cannot be read to its end (malformed, too
	// large, too slow) ends the connection.
	if rs.pump != nil && r.ProtoMajor == 1 && !rs.reset {
		closeConn = rs.pump.drain(lingerBytes, lingerTime) != bodyEOF
	}
	if rs.wantDone {
		var flags uint32
		if rs.reset {
			flags = wire.FlagError
		} else if _, err := rs.flush(); err != nil {
			flags = wire.FlagError
		}
		l.Submit(wire.InDone, id, flags, 0, nil)
	}
}

// statusForBody is ruvoy's answer to a request whose body ended badly.
func statusForBody(state int32) int {
	if state == bodyTimeout {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

func (a *App) logPath(msg, path string, err error) {
	a.rt.log().Error(msg, zap.String("file", path), zap.Error(err))
}
