package serve

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// admission bounds the work an app takes on: at most max requests in Ruby at
// once, at most perClient of them one client's (a request may wait
// queueTimeout for a place), and at most the body budget of request body
// bytes read from clients and not yet taken by the app. Excess is
// answered 503 before it reaches Ruby.
type admission struct {
	permits      chan struct{}
	perConn      int           // places one HTTP/2 or HTTP/3 connection may hold (connPlaces)
	clients      *clientPlaces // nil: a client may hold every place
	queueTimeout time.Duration
	body         *bodyBudget
	counters     *counters
}

func newAdmission(o AppOptions, c *counters) *admission {
	a := &admission{permits: make(chan struct{}, o.MaxRequests), perConn: o.MaxRequestsPerConnection, queueTimeout: o.QueueTimeout,
		body: &bodyBudget{limit: o.MaxInflightBodyBytes, counters: c}, counters: c}
	if o.MaxRequestsPerClient < o.MaxRequests {
		a.clients = newClientPlaces(o.MaxRequestsPerClient)
	}
	return a
}

// admit takes a place for q; it returns the release function (safe to
// call more than once), or false when q was answered 503 (or its client
// left waiting). A request with a body is refused while the body budget
// has no room for its working set, which it then holds (bodyWorkingSet).
func (a *admission) admit(q *request) (func(), bool) {
	w, r, c, hasBody := q.w, q.r, q.conn, q.hasBody
	if hasBody {
		if a.body.full(bodyWorkingSet) {
			a.counters.rejectedBody.Add(1)
			overloaded(w, r)
			return nil, false
		}
		a.body.take(bodyWorkingSet)
	}
	placed := false
	defer func() {
		if hasBody && !placed {
			a.body.release(bodyWorkingSet)
		}
	}()
	if c != nil && c.orphans.Load() >= maxOrphans {
		// Its client reset that many requests still unwinding in Ruby
		// (HTTP/2's rapid reset): no new work from it until they end.
		a.counters.rejectedCount.Add(1)
		overloaded(w, r)
		return nil, false
	}
	// HTTP/1 has one request of a connection in Ruby at a time.
	multiplexed := c != nil && r.ProtoMajor > 1
	if multiplexed && !a.connPlace(c, r) {
		return nil, false // its client reset it while it waited
	}
	var who netip.Addr
	counted := false
	if a.clients != nil {
		who, counted = clientOf(q.remote)
	}
	if got := a.place(q, who, counted); got != admitted {
		if multiplexed {
			c.places.give()
		}
		if got == refused {
			overloaded(w, r)
		}
		return nil, false
	}
	a.counters.admitted.Add(1)
	placed = true
	var released atomic.Bool
	return func() {
		if released.CompareAndSwap(false, true) {
			<-a.permits
			if counted {
				a.clients.give(who)
			}
			if multiplexed {
				c.places.give()
			}
		}
	}, true
}

// place takes a place in Ruby for q, and one of its client's (who) when
// counted: at once, or within the queue timeout. When both are short, the
// refusal counts against max-requests.
func (a *admission) place(q *request, who netip.Addr, counted bool) int {
	select {
	case a.permits <- struct{}{}:
		if !counted || a.clients.take(who) == nil {
			return admitted
		}
		<-a.permits
		if a.queueTimeout <= 0 {
			a.counters.rejectedClient.Add(1)
			return refused
		}
	default:
		if a.queueTimeout <= 0 {
			a.counters.rejectedCount.Add(1)
			return refused
		}
	}
	return a.wait(q, who, counted)
}

// connPlace takes one of the places r's connection may hold, waiting for
// one of its own requests to end when all are taken; false when r's
// client left meanwhile.
func (a *admission) connPlace(c *connInfo, r *http.Request) bool {
	wait := c.places.take(a.perConn)
	if wait == nil {
		return true
	}
	a.counters.connQueued.Add(1)
	defer a.counters.connQueued.Add(-1)
	for wait != nil {
		select {
		case <-wait:
			wait = c.places.take(a.perConn)
		case <-r.Context().Done():
			return false
		}
	}
	return true
}

// connPlaces counts one connection's requests in Ruby. HTTP/2 and HTTP/3
// multiplex: without a bound, a few connections whose streams never take
// a byte (a zero flow-control window) would hold every place in Ruby until
// the write timeout cut them, and open as many again. The Caddy module
// also advertises the bound as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS,
// so that browsers and load balancers open another connection rather than
// queue; a request over it (another handler's streams share the limit, a
// client that ignores it, HTTP/3) waits for a place of its own connection
// rather than getting 503, and the wait costs no place.
type connPlaces struct {
	mu   sync.Mutex
	held int
	next chan struct{} // closed at the next give, for those waiting
}

// defaultPerConn is the places a connection may hold unless configured:
// this many (Apache's, h2o's and QUIC's default stream limit), and no
// more than a quarter of max-requests.
const defaultPerConn = 100

// take takes a place if one is free (nil), or returns a channel closed
// when one may have become free.
func (p *connPlaces) take(limit int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held < limit {
		p.held++
		return nil
	}
	if p.next == nil {
		p.next = make(chan struct{})
	}
	return p.next
}

func (p *connPlaces) give() {
	p.mu.Lock()
	p.held--
	if p.next != nil {
		close(p.next)
		p.next = nil
	}
	p.mu.Unlock()
}

// rewindInMemory is what rack.input keeps in memory for rewind before it
// moves the body to a file (lib/ruvoy/input.rb reads the same constant).
const rewindInMemory = wire.RewindInMemory

// keptFor is what rack.input holds in memory once the app has taken taken
// bytes: all of them up to rewindInMemory, none once they went to a file.
func keptFor(taken int64) int64 {
	if taken <= rewindInMemory {
		return taken
	}
	return 0
}

// maxOrphans bounds the requests of one connection that its client left
// (reset, closed) while Ruby still unwinds them.
const maxOrphans = 64

// bodyWorkingSet is what a request with a body holds in buffers as it
// flows, whatever it has sent yet: a chunk read in Go, and its copy in Ruby
// while the app takes it. Each such request counts it against the budget
// from admission to its end, beside the body bytes it holds.
const bodyWorkingSet = 2 * chunkSize

// bodyBudget counts the request body bytes held in memory, against a limit
// (<= 0: none): what was read from clients and not yet taken by the apps,
// what rack.input keeps in memory for rewind (keptFor), and each request's
// working set. A request is admitted only while the budget has room for its
// working set; a body pump waits for room before it reads on (so TCP slows
// its client), except when its app has taken all it read: that request can
// always get its next chunk, so no set of requests can wait on each other
// for room, and an upload that trickles holds only what it sent.
type bodyBudget struct {
	limit    int64
	held     atomic.Int64
	counters *counters
	mu       sync.Mutex
	freed    chan struct{} // closed when bytes are released, for waiters
}

func (b *bodyBudget) full(n int64) bool { return b.limit > 0 && b.held.Load()+n > b.limit }

func (b *bodyBudget) take(n int64) {
	b.held.Add(n)
	b.counters.bodyHeld.Add(n)
}

func (b *bodyBudget) release(n int64) {
	if n < 0 {
		b.take(-n)
		return
	}
	if n == 0 {
		return
	}
	b.held.Add(-n)
	b.counters.bodyHeld.Add(-n)
	b.mu.Lock()
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// room returns a channel closed at the next release, to wait for room.
func (b *bodyBudget) room() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// How a wait for a place ended.
const (
	admitted = iota
	refused  // no place within the queue timeout
	left     // the client went away
)

// wait queues for a place up to the queue timeout: first for one of its
// client's when counted (holding no place meanwhile), then for one in Ruby.
func (a *admission) wait(q *request, who netip.Addr, counted bool) int {
	a.counters.queued.Add(1)
	defer a.counters.queued.Add(-1)
	began := time.Now()
	timer := time.NewTimer(a.queueTimeout)
	defer timer.Stop()
	client := conn.WatchClient(q.r, q.conn.plumbing())
	mine := !counted // it holds a place of its client's, or needs none
	for {
		var freed <-chan struct{} // closed when one of its client's places may be free
		var permits chan struct{} // nil (never ready) until it has its client's place
		if !mine {
			if freed = a.clients.take(who); freed == nil {
				mine = true
			}
		}
		if mine {
			permits = a.permits
		}
		select {
		case permits <- struct{}{}:
			a.counters.queueWaitNs.Add(int64(time.Since(began)))
			return admitted
		case <-freed:
		case <-timer.C:
			if !mine {
				a.counters.rejectedClient.Add(1)
				return refused
			}
			if counted {
				a.clients.give(who)
			}
			a.counters.rejectedQueue.Add(1)
			return refused
		case <-client.Fin:
			client.FinSeen()
		case <-client.Probe:
			client.SendProbe(q.w)
		case <-client.Gone:
			if mine && counted {
				a.clients.give(who)
			}
			return left
		}
	}
}

func overloaded(w http.ResponseWriter, r *http.Request) {
	w.Header()["Retry-After"] = []string{strconv.Itoa(1)}
	refuse(w, r, http.StatusServiceUnavailable)
}

// refuse answers before the app runs.
func refuse(w http.ResponseWriter, r *http.Request, status int) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if r.ProtoMajor != 1 {
		// The stream's body is dropped with it; HTTP/2 and HTTP/3 have no
		// Connection header (an HTTP/3 client refuses the answer).
		http.Error(w, http.StatusText(status), status)
		return
	}
	if r.ContentLength > lingerBytes {
		w.Header()["Connection"] = []string{"close"}
		http.Error(w, http.StatusText(status), status)
		return
	}
	// The answer goes out first; then the body is read and thrown away (no
	// memory held), so the connection stays usable and the client, still
	// sending, gets this answer rather than a reset.
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	http.Error(w, http.StatusText(status), status)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	io.Copy(io.Discard, io.LimitReader(r.Body, lingerBytes+1))
	_ = rc.SetReadDeadline(time.Time{})
}

// A refused request's body is read and dropped up to this size and time;
// beyond, the connection is closed.
const (
	lingerBytes = 8 << 20
	lingerTime  = 5 * time.Second
)
