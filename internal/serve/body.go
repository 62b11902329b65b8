package serve

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// bodyPump streams a request body to the VM as the app reads it: it keeps
// at most window bytes ahead of what the app has taken, and otherwise leaves
// the bytes to the kernel, so TCP flow control slows a fast uploader.
type bodyPump struct {
	st      *stream
	vm      vmLink
	id      uint64
	body    io.Reader
	window  int64
	max     int64 // 0: no limit
	budget  *bodyBudget
	rc      *http.ResponseController
	state   atomic.Int32  // a body* state below
	changed chan struct{} // signalled whenever state changes
	stop    chan struct{}
	done    chan struct{}
	failed  chan struct{} // closed when the body ended badly (see ended)
	stopped bool
	// discard, once set, has the pump read on without a window and drop
	// what it reads, at most discardLeft more bytes: the app is done.
	discard     atomic.Bool
	discardLeft int64
}

// The states of a body pump. Once it leaves the first two it has ended.
const (
	bodyReading   int32 = iota // a Read is under way, or about to be
	bodyWaiting                // the window is full: the app has not taken what was sent
	bodyEOF                    // the whole body arrived
	bodyMalformed              // its framing was invalid, or it ended before its length
	bodyTimeout                // the client sent too slowly (a read deadline passed)
	bodyTooLarge               // it went over MaxBodyBytes
	bodyGone                   // the connection failed
	bodyStopped                // the handler stopped the pump
)

// chunkSize is the most one body message carries.
const chunkSize = 64 << 10

var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// startPump starts streaming q's body to its VM (rc: q's response's).
func startPump(q *request, rc *http.ResponseController) *bodyPump {
	o := &q.app.opts
	p := &bodyPump{st: q.st, vm: q.link, id: q.id, body: q.r.Body, window: o.RequestWindow, max: o.MaxBodyBytes, budget: q.app.admit.body, rc: rc,
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), failed: make(chan struct{})}
	go p.run()
	return p
}

func (p *bodyPump) set(state int32) {
	p.state.Store(state)
	signal(p.changed)
}

// ended is how the body ended, or bodyReading/bodyWaiting while it goes on.
func (p *bodyPump) ended() int32 { return p.state.Load() }

func (p *bodyPump) run() {
	defer close(p.done)
	bufp := chunkBuffers.Get().(*[]byte)
	defer chunkBuffers.Put(bufp)
	buf := *bufp
	var sent int64
	for {
		for !p.discard.Load() {
			// Wait while the window is full, or while the app has bytes it
			// has not taken and the budget has no room for more.
			unread := sent - p.st.bodyTaken.Load()
			var room <-chan struct{}
			if unread > 0 && p.budget.full(chunkSize) {
				room = p.budget.room()
				if !p.budget.full(chunkSize) {
					continue
				}
			} else if unread < p.window {
				break
			}
			p.set(bodyWaiting)
			select {
			case <-p.st.bodyNotify:
			case <-room:
			case <-p.stop:
				p.set(bodyStopped)
				return
			}
		}
		p.set(bodyReading)
		if p.discard.Load() {
			if p.discardLeft <= 0 {
				p.set(bodyStopped)
				return
			}
			n, err := p.body.Read(buf[:min(int64(len(buf)), p.discardLeft)])
			p.discardLeft -= int64(n)
			if err != nil && p.end(err) {
				return
			}
			continue
		}
		room := p.window - (sent - p.st.bodyTaken.Load())
		n, err := p.body.Read(buf[:min(int64(len(buf)), room)])
		if n > 0 {
			sent += int64(n)
			if p.max > 0 && sent > p.max {
				p.vm.Submit(wire.InBodyEnd, p.id, wire.FlagTooLarge, 0, nil)
				p.set(bodyTooLarge)
				return
			}
			p.budget.take(int64(n))
			p.st.bodySent.Add(int64(n))
			p.vm.Submit(wire.InBody, p.id, 0, 0, buf[:n])
		}
		if err != nil && p.end(err) {
			return
		}
	}
}

// end says how the body ended, to the VM and to the handler, and reports
// true; it reports false for a nil error.
func (p *bodyPump) end(err error) bool {
	if err == nil {
		return false
	}
	if err == io.EOF {
		p.vm.Submit(wire.InBodyEnd, p.id, 0, 0, nil)
		p.set(bodyEOF)
		return true
	}
	select {
	case <-p.stop: // the handler cut the read short
		p.vm.Submit(wire.InBodyEnd, p.id, wire.FlagError, 0, nil)
		p.set(bodyStopped)
		return true
	default:
	}
	state, flags := classifyBodyError(err)
	p.vm.Submit(wire.InBodyEnd, p.id, flags, 0, nil)
	p.set(state)
	if state != bodyTooLarge {
		close(p.failed)
	}
	return true
}

// drain reads what is left of the body and drops it, at most limit bytes
// for at most wait, once the app has answered without it; it returns how
// the body ended. Reading it whole keeps an HTTP/1 connection for the next
// request, and the client, still sending, reads the answer rather than
// meeting a reset.
func (p *bodyPump) drain(limit int64, wait time.Duration) int32 {
	if s := p.state.Load(); s != bodyReading && s != bodyWaiting {
		return s
	}
	p.discardLeft = limit // read by run only once discard is seen
	p.discard.Store(true)
	signal(p.st.bodyNotify)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.finish()
	}
	return p.state.Load()
}

// classifyBodyError says why reading a request body failed: the
// connection broke, the client was too slow, the body went over the
// limit, or else the client sent something that is not a valid body
// (chunked framing Go refused, or fewer bytes than Content-Length before
// its FIN).
func classifyBodyError(err error) (int32, uint32) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return bodyTooLarge, wire.FlagTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return bodyTimeout, wire.FlagError
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return bodyGone, wire.FlagError
	}
	return bodyMalformed, wire.FlagMalformed
}

// settle waits until the pump has ended or waits for the app (its window
// is full), at most limit. The handler calls it when the app answered
// without needing the rest of the body, to tell whether the connection can
// carry another request.
func (p *bodyPump) settle(limit time.Duration) int32 {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if s := p.state.Load(); s != bodyReading {
			return s
		}
		select {
		case <-p.changed:
		case <-timer.C:
			return p.state.Load()
		}
	}
}

// finish stops the pump and waits for it: a Read in progress is cut short
// with a read deadline, then the deadline is lifted again so that the server
// can drain or close the connection as HTTP says.
func (p *bodyPump) finish() {
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.stop)
	select {
	case <-p.done:
		return
	case <-time.After(10 * time.Millisecond):
	}
	_ = p.rc.SetReadDeadline(time.Now())
	<-p.done
	_ = p.rc.SetReadDeadline(time.Time{})
}
