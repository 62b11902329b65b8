package serve

import (
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"time"

	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// responder writes one request's response messages to its ResponseWriter.
//
// The head is held, not written, until body bytes follow it or the batch
// of messages it came in has been handled: a body that fails before its
// first byte then still becomes a 500 instead of a connection closed with
// nothing sent. Before the head goes out, the request body decides what
// the connection may do next (commit).
type responder struct {
	*request
	pump       *bodyPump // the request body's, or nil
	ignoreBody bool      // the server sent its own body in the app's place
	err        error     // a write failed
	writeErr   error     // why a write to the client failed
	sent       int64     // body bytes written
	rc         *http.ResponseController
	status     int
	pending    bool // a head is set up but not written yet
	wroteHead  bool
	lastBatch  bool // the batch being written ends the response
	ended      bool // the response is complete
	reset      bool // the VM cut the body short
	refused    int  // the status ruvoy answered in the app's place (400, 408), or 0
	wantDone   bool // the VM waits for wire.InDone
	written    int  // body bytes written since the last credit
	hijacked   bool // the connection is the app's (hijack.go)
}

var errClientGone = errors.New("ruvoy: writing to the client failed")

// write handles a batch of messages and frees them. It reports
// errClientGone when a write failed.
func (rs *responder) write(m *msg.Msg) error {
	rs.lastBatch = false
	for c := m; c != nil; c = c.Next() {
		if c.Flags()&wire.FlagEnd != 0 {
			rs.lastBatch = true
		}
	}
	var err error
	for m != nil {
		next := m.Next()
		if err == nil && !rs.ended {
			err = rs.handle(m)
		} else {
			dropMsg(m)
			m = next
			continue
		}
		m.Free()
		m = next
	}
	if err == nil && rs.pending {
		rs.commit()
	}
	return err
}

func (rs *responder) handle(m *msg.Msg) error {
	p := m.Payload()
	if m.Flags()&wire.FlagWantDone != 0 {
		rs.wantDone = true
	}
	switch m.Kind() {
	case wire.OutHead:
		status, queued := wire.HeadAux(m.Aux())
		rs.queued(queued)
		body, ok := rs.setHead(p, status)
		if !ok {
			return nil
		}
		if took, err := rs.sendfile(); took {
			if err != nil {
				rs.err = err
				return err
			}
		} else if err := rs.writeBody(body); err != nil {
			return err
		}
	case wire.OutFile:
		status, queued := wire.HeadAux(m.Aux())
		rs.queued(queued)
		if err := rs.writeFile(p, status); err != nil {
			return err
		}
	case wire.OutData:
		if err := rs.writeBody(p); err != nil {
			return err
		}
	case wire.OutEarlyHints:
		rs.earlyHints(p)
	case wire.OutHijack:
		status, queued := wire.HeadAux(m.Aux())
		rs.queued(queued)
		rs.hijack(p, status)
	case wire.OutReset:
		if rs.pending || !rs.wroteHead {
			// Nothing went to the client yet: a clean 500 instead of a
			// connection closed with nothing sent.
			rs.pending = false
			status := http.StatusInternalServerError
			if m.Aux() != 0 {
				status = int(m.Aux()) // 502 or 504: its worker died, or stopped (internal/cluster/frontend)
			}
			rs.answer(status, false)
		} else {
			rs.reset = true
		}
	}
	if m.Flags()&wire.FlagEnd != 0 {
		rs.ended = true
	}
	return nil
}

// hijack hands the connection to the app (wire.OutHijack; a payload is a
// head to write first) and the VM the descriptor of its end; if it
// cannot, the VM hears why and the client gets 500.
func (rs *responder) hijack(head []byte, status int) {
	rs.ended = true
	if len(head) == 0 {
		head = nil
	}
	var fd int
	var flags uint32
	err := errors.New("the response has begun")
	if !rs.wroteHead && !rs.pending {
		fd, flags, err = rs.takeConnection(head, status)
	}
	if err != nil {
		rs.link.Submit(wire.InHijacked, rs.id, wire.FlagFailed, 0, []byte(err.Error()))
		if !rs.hijacked {
			rs.answer(http.StatusInternalServerError, false)
		}
		return
	}
	rs.link.Hijacked(rs.id, fd, flags)
}

// setHead sets the app's headers and status, to be written by commit; it
// returns the body bytes that follow them in the payload.
func (rs *responder) setHead(p []byte, status int) ([]byte, bool) {
	length, _, count, p, ok := wire.ResponseStart(p)
	if !ok || rs.wroteHead || rs.pending {
		return nil, false
	}
	h := rs.w.Header()
	for i := 0; i < count; i++ {
		name, value, rest, ok := wire.ResponseHeader(p)
		if !ok {
			break
		}
		key := canonicalHeader(name)
		h[key] = append(h[key], string(value))
		p = rest
	}
	if length >= 0 {
		h["Content-Length"] = []string{strconv.FormatInt(length, 10)}
	}
	if _, ok := h["Content-Type"]; !ok {
		// No sniffing: the client gets the type the app gave, or none.
		h["Content-Type"] = nil
	}
	rs.status = status
	rs.pending = true
	return p, true
}

// commit writes the head the app set. On HTTP/1 an app that answered
// without the rest of the request body first lets it arrive (up to the
// window, as Go's own server reads a body before it writes a head), so that
// a body which turns out malformed gets 400 instead of the app's answer.
// A head whose response goes on (a body the VM enumerates sends each chunk
// as it comes, its end in a later message) waits for the body briefly.
func (rs *responder) commit() {
	rs.pending = false
	if p := rs.pump; p != nil {
		state := p.ended()
		if state == bodyReading && rs.r.ProtoMajor == 1 {
			wait := lingerTime
			if !rs.lastBatch {
				wait = streamedHeadWait
			}
			state = p.settle(wait)
		}
		switch state {
		case bodyMalformed:
			rs.answer(http.StatusBadRequest, true)
			return
		case bodyTimeout:
			rs.answer(http.StatusRequestTimeout, true)
			return
		}
	}
	rs.wroteHead = true
	rs.w.WriteHeader(rs.status)
}

// streamedHeadWait bounds how long the head of a response still under
// way waits for a request body still arriving to end (commit).
const streamedHeadWait = 50 * time.Millisecond

// answer replaces whatever the app set with ruvoy's own short answer. With
// refused, the request was at fault (a malformed or too slow body): the
// app's answer, whatever comes of it, is dropped and an HTTP/1 connection
// closes after this one.
func (rs *responder) answer(status int, refused bool) {
	if !refused && rs.pump != nil {
		// The app failed on a body that was at fault: the body's answer.
		if state := rs.pump.ended(); state == bodyMalformed || state == bodyTimeout {
			status, refused = statusForBody(state), true
		}
	}
	h := rs.w.Header()
	for name := range h {
		if name != "Alt-Svc" {
			delete(h, name)
		}
	}
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	text := http.StatusText(status) + "\n"
	h["Content-Length"] = []string{strconv.Itoa(len(text))}
	if refused {
		rs.refused = status
		if rs.r.ProtoMajor == 1 {
			h["Connection"] = []string{"close"}
		}
	}
	rs.wroteHead, rs.ignoreBody, rs.ended = true, true, true
	rs.status = status
	rs.w.WriteHeader(status)
	_, _ = io.WriteString(rs.w, text)
}

func (rs *responder) writeBody(p []byte) error {
	if rs.err != nil {
		return rs.err
	}
	if len(p) == 0 {
		return nil
	}
	if rs.pending {
		rs.commit()
	}
	if rs.ignoreBody {
		return nil
	}
	if _, err := rs.w.Write(p); err != nil {
		rs.writeErr = err
		return errClientGone
	}
	rs.written += len(p)
	rs.sent += int64(len(p))
	return nil
}

// writeFile sends a file body: the VM opened it, Go owns the descriptor now.
func (rs *responder) writeFile(p []byte, status int) error {
	length, fd, _, _, ok := wire.ResponseStart(p)
	if !ok || fd < 0 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "response-body")
	defer f.Close()
	if _, ok := rs.setHead(p, status); !ok {
		return rs.err
	}
	if took, err := rs.sendfile(); took {
		rs.err = err
		return err // the header's file went in this one's place
	}
	rs.commit()
	if rs.ignoreBody {
		return nil
	}
	n, err := conn.CopyFile(rs.w, f, length, rs.app.opts.WriteChunk)
	rs.sent += n
	if err != nil {
		rs.writeErr = err
		return errClientGone
	}
	return nil
}

// flush pushes what was written to the client and returns how many body
// bytes left since the last flush, to credit the VM's window.
func (rs *responder) flush() (int, error) {
	if rs.rc == nil {
		rs.rc = http.NewResponseController(rs.w)
	}
	if err := rs.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		rs.writeErr = err
		return 0, errClientGone
	}
	n := rs.written
	rs.written = 0
	return n, nil
}

// commonHeaders maps header names as apps write them (lower case, Rack 3)
// and in canonical form to the canonical form, without allocating.
var commonHeaders = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{
		"Accept-Ranges", "Access-Control-Allow-Origin", "Age", "Cache-Control", "Connection",
		"Content-Disposition", "Content-Encoding", "Content-Language", "Content-Length",
		"Content-Location", "Content-Range", "Content-Security-Policy", "Content-Type", "Date",
		"Etag", "Expires", "Last-Modified", "Link", "Location", "Pragma", "Referrer-Policy",
		"Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security", "Vary",
		"Www-Authenticate", "X-Content-Type-Options", "X-Download-Options", "X-Frame-Options",
		"X-Permitted-Cross-Domain-Policies", "X-Request-Id", "X-Runtime", "X-Xss-Protection",
	} {
		m[name] = name
		lower := []byte(name)
		for i, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		m[string(lower)] = name
	}
	m["ETag"] = "Etag"
	return m
}()

func canonicalHeader(b []byte) string {
	if name, ok := commonHeaders[string(b)]; ok {
		return name
	}
	return textproto.CanonicalMIMEHeaderKey(string(b))
}
