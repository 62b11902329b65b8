package serve

import (
	"io"
	"net/http"
	"time"

	"github.com/ruvoy/ruvoy/internal/conn"
)

// How a handler ends the connection under a response, beyond what
// returning from ServeHTTP does.

// cut ends a response whose body failed after its head went out, so that
// the client cannot take it for a whole one. Go closes an HTTP/1.1
// connection without the last chunk (or before Content-Length) and resets
// an HTTP/2 stream when the handler panics with ErrAbortHandler. An
// HTTP/1.0 body without a length ends where the connection does, and a
// clean FIN would pass for its end: there the connection is reset (RST).
//
// What the app produced before it failed goes out first: the client gets
// every byte the app yielded, then the cut.
func (rs *responder) cut() {
	_, _ = rs.flush()
	if rs.r.ProtoMajor == 1 && rs.r.ProtoMinor == 0 && conn.Abort(rs.w) {
		return
	}
	panic(http.ErrAbortHandler)
}

// closeConnection ends an HTTP/1 connection after a whole response, when
// the request's body was not read to its end (the bytes left are not the
// next request) or was refused. It takes the connection from the server,
// ends a chunked body, sends FIN, and reads and drops what the client
// still sends, up to lingerBytes for lingerTime, before it closes: a close
// with unread bytes would reset the connection, and the client, still
// sending, could lose the answer (Go's server waits the same way, but not
// when a handler asked to close).
func (rs *responder) closeConnection() {
	if _, err := rs.flush(); err != nil {
		return
	}
	c, buf, err := http.NewResponseController(rs.w).Hijack()
	if err != nil {
		return // the connection is not HTTP/1's to take; Go closes it
	}
	if rs.chunked() {
		buf.WriteString("0\r\n\r\n")
	}
	if buf.Flush() != nil {
		c.Close()
		return
	}
	if tcp := conn.TCP(c); tcp != nil {
		_ = tcp.CloseWrite()
	}
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(lingerTime))
		if n, _ := io.CopyN(io.Discard, c, lingerBytes); n == lingerBytes {
			// Still sending past what is worth reading: the close resets
			// the connection, and a reset drops what the client's kernel
			// holds unread, maybe the answer. A fast client sends the limit
			// in milliseconds; it gets a pause to read first (as Go's
			// server gives: rstAvoidanceDelay).
			time.Sleep(resetDelay)
		}
		c.Close()
	}()
}

// resetDelay is how long a connection that will be reset stays open after
// its answer, for the client to read it.
const resetDelay = 500 * time.Millisecond

// chunked says whether Go framed the response's body in chunks: HTTP/1.1,
// a status and method with a body, and no Content-Length.
func (rs *responder) chunked() bool {
	_, length := rs.w.Header()["Content-Length"]
	s := rs.status
	if rs.refused != 0 || length || !rs.r.ProtoAtLeast(1, 1) || rs.r.Method == http.MethodHead {
		return false
	}
	return s >= 200 && s != http.StatusNoContent && s != http.StatusNotModified
}
