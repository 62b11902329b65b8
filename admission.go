package ruvoy

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// admission bounds the work an app takes on: at most max requests in Ruby at
// once (a request may wait queueTimeout for a place), and at most
// bodyBudget bytes of request bodies held in memory, reserved before a body
// is read. Excess is answered 503 before it reaches Ruby.
type admission struct {
	slots        chan struct{}
	queueTimeout time.Duration
	bodyBudget   int64
	bodyHeld     atomic.Int64
	counters     *counters
}

// counters are the runtime-wide figures the metrics report.
type counters struct {
	admitted, rejectedCount, rejectedBody, rejectedQueue atomic.Int64
	queueWaitNs, queued                                  atomic.Int64
	bodyHeld                                             atomic.Int64
	stalls                                               atomic.Int64
}

func newAdmission(max int, queueTimeout time.Duration, bodyBudget int64, c *counters) *admission {
	return &admission{slots: make(chan struct{}, max), queueTimeout: queueTimeout, bodyBudget: bodyBudget, counters: c}
}

// admit takes a place for r, reserving body bytes; it returns the release
// function, or false when r was answered 503 (or its client left waiting).
func (a *admission) admit(w http.ResponseWriter, r *http.Request, body int64) (func(), bool) {
	if body > 0 && a.bodyBudget > 0 {
		if a.bodyHeld.Add(body) > a.bodyBudget {
			a.bodyHeld.Add(-body)
			a.counters.rejectedBody.Add(1)
			overloaded(w, r)
			return nil, false
		}
		a.counters.bodyHeld.Add(body)
	}
	releaseBody := func() {
		if body > 0 && a.bodyBudget > 0 {
			a.bodyHeld.Add(-body)
			a.counters.bodyHeld.Add(-body)
		}
	}
	select {
	case a.slots <- struct{}{}:
	default:
		if wait := a.wait(w, r); wait != admitted {
			releaseBody()
			if wait == refused {
				overloaded(w, r)
			}
			return nil, false
		}
	}
	a.counters.admitted.Add(1)
	return func() {
		<-a.slots
		releaseBody()
	}, true
}

// How a wait for a place ended.
const (
	admitted = iota
	refused  // no place within the queue timeout
	left     // the client went away
)

// wait queues for a place up to the queue timeout.
func (a *admission) wait(w http.ResponseWriter, r *http.Request) int {
	if a.queueTimeout <= 0 {
		a.counters.rejectedCount.Add(1)
		return refused
	}
	a.counters.queued.Add(1)
	defer a.counters.queued.Add(-1)
	began := time.Now()
	timer := time.NewTimer(a.queueTimeout)
	defer timer.Stop()
	client := watchClient(r)
	for {
		select {
		case a.slots <- struct{}{}:
			a.counters.queueWaitNs.Add(int64(time.Since(began)))
			return admitted
		case <-timer.C:
			a.counters.rejectedQueue.Add(1)
			return refused
		case <-client.fin:
			client.finSeen()
		case <-client.probe:
			client.sendProbe(w)
		case <-client.gone:
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
	if r.ProtoMajor != 1 || r.ContentLength > lingerBytes {
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
