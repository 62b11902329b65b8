package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyPump streams a request body to the VM as the app reads it: it keeps
// at most window bytes ahead of what the app has taken, and otherwise leaves
// the bytes to the kernel, so TCP flow control slows a fast uploader.
type bodyPump struct {
	st      *stream
	id      uint64
	body    io.Reader
	window  int64
	max     int64 // 0: no limit
	rc      *http.ResponseController
	stop    chan struct{}
	done    chan struct{}
	failed  chan struct{} // closed when the client stopped sending mid-body
	stopped bool
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func startPump(st *stream, id uint64, body io.Reader, window, max int64, rc *http.ResponseController) *bodyPump {
	p := &bodyPump{st: st, id: id, body: body, window: window, max: max, rc: rc,
		stop: make(chan struct{}), done: make(chan struct{}), failed: make(chan struct{})}
	go p.run()
	return p
}

func (p *bodyPump) run() {
	defer close(p.done)
	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	buf := *bufp
	var sent int64
	for {
		for sent-p.st.bodyTaken.Load() >= p.window {
			select {
			case <-p.st.bodyNotify:
			case <-p.stop:
				return
			}
		}
		room := p.window - (sent - p.st.bodyTaken.Load())
		n, err := p.body.Read(buf[:min(int64(len(buf)), room)])
		if n > 0 {
			sent += int64(n)
			if p.max > 0 && sent > p.max {
				submit(C.RV_IN_BODY_END, p.id, C.RV_F_TOO_LARGE, 0, nil)
				return
			}
			submit(C.RV_IN_BODY, p.id, 0, 0, buf[:n])
		}
		switch {
		case err == nil:
		case err == io.EOF:
			submit(C.RV_IN_BODY_END, p.id, 0, 0, nil)
			return
		default:
			var tooLarge *http.MaxBytesError
			flags := C.uint32_t(C.RV_F_ERROR)
			if errors.As(err, &tooLarge) {
				flags = C.RV_F_TOO_LARGE
			}
			submit(C.RV_IN_BODY_END, p.id, flags, 0, nil)
			select {
			case <-p.stop:
			default:
				if flags == C.RV_F_ERROR {
					close(p.failed)
				}
			}
			return
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
