package serve

import (
	"net/http"
	"sync"
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// A request is one request on its way through the path: what ServeHTTP
// learns of it step by step (its connection, its places, the VM it runs
// in, its stream), and then its response (response.go, respond.go).
type request struct {
	app     *App
	w       http.ResponseWriter
	r       *http.Request
	at      arrival   // when its head arrived
	conn    *connInfo // its server connection, or nil
	remote  string    // its client's address, as the server names it
	hasBody bool
	release func()  // gives its places back (admission); safe to call again
	link    vmLink  // the VM it runs in
	st      *stream // its Go-side state, which the VM's messages reach
	id      uint64  // its stream's id, as the VM knows it
	direct  int     // its direct line (the VM's answer waited for on this thread), or -1
}

// ServeHTTP takes a request to the VM and writes its answer: a place in
// Ruby (admission), a VM (this process's, or a worker's), a stream, the
// head encoded into one message; then what the VM sends, until the
// response ends or the client goes away (respond.go).
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := arrived()
	alone := a.arrive()
	defer a.requestDone()
	// Caddy names itself; ruvoy sends no Server header unless the app does.
	delete(w.Header(), "Server")
	requestID(r)
	if a.opts.MaxBodyBytes > 0 && r.ContentLength > a.opts.MaxBodyBytes {
		refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	q := &request{app: a, w: w, r: r, at: at, conn: connOf(r), remote: a.clientAddress(r), direct: -1,
		hasBody: r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0}
	if !q.admit() || !q.start(alone) {
		return
	}
	rs := &responder{request: q}
	if t := a.opts.RequestTimeout; t > 0 {
		// It runs until Ruby is done with the request, even if the client left.
		q.st.setTimer(time.AfterFunc(t, func() { q.link.Interrupt(q.id, wire.IntrTimeout) }))
	}
	if q.hasBody {
		rs.rc = http.NewResponseController(w)
		_ = rs.rc.EnableFullDuplex() // HTTP/1: let the app answer while the body still arrives
		rs.pump = startPump(q, rs.rc)
	}
	rs.respond()
}

// admit takes the request's places (admission), a VM to run in and a
// stream; false when it was answered instead (503, or its client left).
func (q *request) admit() bool {
	a := q.app
	release, ok := a.admit.admit(q)
	if !ok {
		return false
	}
	q.release = release
	giveBack := func(answer func(http.ResponseWriter, *http.Request)) bool {
		release()
		if q.hasBody {
			a.admit.body.release(bodyWorkingSet)
		}
		answer(q.w, q.r)
		return false
	}
	if q.link, ok = a.link(q.r); !ok {
		return giveBack(noWorker)
	}
	if q.st = a.rt.streams.acquire(q); q.st == nil {
		return giveBack(overloaded)
	}
	q.st.mu.Lock()
	q.id = q.st.id
	q.st.mu.Unlock()
	return true
}

var headBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// start hands the VM the request's head (alone: requests come one at a
// time, so its answer may be waited for on this thread); false when it
// was answered instead (431, or its worker is gone).
func (q *request) start(alone bool) bool {
	a := q.app
	bufp := headBuffers.Get().(*[]byte)
	defer headBuffers.Put(bufp)
	head, ok := encodeHead((*bufp)[:0], q.r, q.headInfo())
	*bufp = head[:0]
	if !ok {
		q.unstarted()
		http.Error(q.w, "Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
		return false
	}
	q.direct = a.claimDirect(q, alone)
	if !q.link.Start(q.id, a.id, head) {
		q.unstarted()
		noWorker(q.w, q.r)
		return false
	}
	return true
}

// unstarted lets go of a request the VM never saw.
func (q *request) unstarted() {
	if q.direct >= 0 {
		q.app.rt.vm.ReleaseDirect(q.direct)
		q.direct = -1
	}
	q.app.rt.streams.detach(q.st)
	q.app.rt.streams.unref(q.st) // the VM's reference: it never took it
}

// headInfo is what the request's head carries beside the request.
func (q *request) headInfo() *headInfo {
	o, r := &q.app.opts, q.r
	h := &headInfo{remote: q.remote, tls: r.TLS != nil, trusted: o.Trusted != nil && o.Trusted(r), body: q.hasBody,
		hintsHTTP1: o.EarlyHintsHTTP1, window: uint32(o.ResponseWindow), arrived: q.at.mono}
	h.requestStart = requestStart(r, h.trusted, q.at)
	if o.Context != nil {
		h.context = o.Context.contextJSON(r)
	}
	if o.ScriptName != nil {
		h.scriptName = o.ScriptName(r)
	}
	if o.RemoteUser != nil {
		h.remoteUser = o.RemoteUser(r)
	}
	return h
}
