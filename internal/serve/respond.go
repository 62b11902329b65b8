package serve

import (
	"net/http"
	"time"

	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// respond writes what the VM sends until the response ends or the client
// goes away, then lets go of the request.
func (rs *responder) respond() {
	cancel, closeConn := rs.relay()
	rs.finish(cancel, closeConn)
}

// relay hands the VM's messages to the client as they come. // direct line it first waits for them on its own thread (host's
// direct.go). It returns what the VM is told when it gives up (0, or
// wire.FlagError / wire.FlagMalformed) and whether an HTTP/1 connection
// ends after the response.
func (rs *responder) relay() (cancel uint32, closeConn bool) {
	q, rt := rs.request, rs.app.rt
	client := conn.WatchClient(q.r, q.conn.plumbing())
	var bodyFailed <-chan struct{}
	if rs.pump != nil {
		bodyFailed = rs.pump.failed
	}
	unflushed := false                // written, not yet flushed: a flush waits until nothing more is at hand
	flushed := false                  // the head is out: how the body is framed is settled
	var writing time.Time             // when the write under way began
	failed := func() (uint32, bool) { // a write to the client failed
		if stalled(rs.writeErr, time.Since(writing), rs.app.opts.WriteTimeout) {
			rt.writeCuts.cut(rt, q.r, rs.sent, rs.app.opts.WriteTimeout)
		}
		return wire.FlagError, false
	}
	for {
		m := q.st.take()
		if m == nil && unflushed && !flushed && q.direct >= 0 && rt.vm.PollDirect(q.direct) {
			continue // more came while this thread yielded: same flush
		}
		if m == nil && unflushed {
			unflushed, flushed = false, true
			writing = time.Now()
			n, err := rs.flush()
			if err != nil {
				return failed()
			}
			if n > 0 {
				q.link.Submit(wire.InCredit, q.id, 0, uint64(n), nil)
			}
		}
		if m == nil && q.direct >= 0 {
			if !rt.vm.WaitDirect(q.direct) {
				q.direct = -1 // given back
			}
			continue
		}
		if m == nil {
			select {
			case <-q.st.notify:
			case <-client.Fin:
				client.FinSeen()
			case <-client.Probe:
				if !rs.wroteHead {
					client.SendProbe(rs.w)
				}
			case <-client.Gone:
				return wire.FlagError, false
			case <-bodyFailed:
				return rs.bodyFailed()
			}
			continue
		}
		writing = time.Now()
		err := rs.write(m)
		if rs.hijacked {
			q.release() // the request is over; the connection is the app's
			return 0, false
		}
		if err != nil {
			if rs.wantDone {
				q.link.Submit(wire.InDone, q.id, wire.FlagError, 0, nil)
			}
			return failed()
		}
		if rs.refused != 0 {
			// The request body was at fault: 400 went out instead of the
			// app's answer, and the app hears why.
			return wire.FlagMalformed, q.r.ProtoMajor == 1
		}
		if rs.ended || rs.reset {
			return 0, rs.complete()
		}
		unflushed = rs.wroteHead
	}
}

// bodyFailed answers a request whose body ended badly before its
// response did.
func (rs *responder) bodyFailed() (cancel uint32, closeConn bool) {
	state := rs.pump.ended()
	if state == bodyGone {
		return wire.FlagError, false
	}
	if rs.wroteHead {
		rs.reset = true // the head is out: cut the response
	} else {
		rs.answer(statusForBody(state), true)
		closeConn = rs.r.ProtoMajor == 1
	}
	return wire.FlagMalformed, closeConn
}

// complete ends a response the VM ended, and says whether an HTTP/1
// connection ends after it.
func (rs *responder) complete() (closeConn bool) {
	if !rs.wroteHead && !rs.reset {
		rs.app.rt.log().Error("ruvoy: the VM ended a response without a head", zap.String("path", rs.r.URL.Path))
		rs.answer(http.StatusInternalServerError, false)
	}
	// On HTTP/1 the bytes after a request's body are the next request: an
	// app that answered without the whole body has the rest read and
	// dropped, and a body that cannot be read to its end (malformed, too
	// large, too slow) ends the connection.
	if rs.pump != nil && rs.r.ProtoMajor == 1 && !rs.reset {
		closeConn = rs.pump.drain(lingerBytes, lingerTime) != bodyEOF
	}
	if rs.wantDone {
		var flags uint32
		if rs.reset {
			flags = wire.FlagError
		} else if _, err := rs.flush(); err != nil {
			flags = wire.FlagError
		}
		rs.link.Submit(wire.InDone, rs.id, flags, 0, nil)
	}
	return closeConn
}

// finish lets go of the request once its response is done (cancel and
// closeConn: what relay returned): its direct line, its body's pump, the
// VM told to give up, its places, its stream; then a response cut short
// is cut, or the connection ended.
func (rs *responder) finish(cancel uint32, closeConn bool) {
	q, rt := rs.request, rs.app.rt
	if q.direct >= 0 {
		rt.vm.ReleaseDirect(q.direct)
	}
	if rs.pump != nil {
		rs.pump.finish()
	}
	if cancel != 0 {
		q.link.Cancel(q.id, cancel&wire.FlagMalformed)
	}
	if cancel&wire.FlagError != 0 {
		// Its client left: its place goes to the next request now, and
		// what Ruby still unwinds counts against its connection.
		q.release()
		rt.streams.orphan(q.st, q.conn)
	}
	if rs.refused == http.StatusRequestTimeout {
		rt.log().Warn("ruvoy: a request body arrived too slowly (the server's read_min_rate or read_idle_timeout): answered 408",
			zap.String("method", q.r.Method), zap.String("path", q.r.URL.Path), zap.Int64("received", q.st.bodySent.Load()))
	}
	rt.streams.detach(q.st)
	switch {
	case rs.reset && cancel&wire.FlagError == 0:
		rs.cut() // a body cut short must look cut short
	case closeConn:
		rs.closeConnection()
	}
}

// statusForBody is ruvoy's answer to a request whose body ended badly.
func statusForBody(state int32) int {
	if state == bodyTimeout {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}
