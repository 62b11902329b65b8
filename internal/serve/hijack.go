package serve

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// Hijacked connections (rack.hijack, a Rack 3 upgrade; rv_hijack.c).
//
// A cleartext TCP connection is handed over whole: the VM gets a copy of
// its descriptor (in cluster mode it crosses to the worker) and Go lets
// go of it, so the app reads and writes the client's socket itself.
// Where Go must stay in between (TLS: Go keeps the TLS state; bytes Go or
// the HTTP/1 guard read ahead of the app; a connection that is not TCP),
// the app gets one end of a socket pair instead, and Go pumps bytes
// between the other end and the connection. An idle pump waits for
// readability holding no buffer, so it costs two parked goroutines.
// Writes block on a slow reader, so the sockets' buffers bound what a
// connection holds in flight. When the app closes its end the client's
// connection closes; when the client half-closes the app reads EOF; a
// stop closes the pumped ones (Runtime.Shutdown) and the process's exit
// the others.

// takeConnection hijacks rs's connection for the app. It writes head
// first (partial hijack or an upgrade; nil for a full hijack), and returns
// the descriptor the VM gets, with wire.FlagTcp when it is the client's
// own socket.
func (rs *responder) takeConnection(head []byte, status int) (int, uint32, error) {
	// The server's own writer, under Caddy's recorders: a recorder's
	// hijacked connection counts what is written into its size, which
	// Caddy reads after the handler returned (it is made for handlers that
	// stay until the connection ends).
	w := rs.w
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return -1, 0, errors.New("the server cannot hand this connection over")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return -1, 0, err
	}
	rs.hijacked = true
	_ = c.SetDeadline(time.Time{}) // the app's protocol has its own timeouts
	var pending []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		pending = append(pending, b...)
	}
	pending = append(pending, conn.HandOver(c)...)

	// The descriptor first, the head after: if there is none to be had
	// (EMFILE), nothing went out yet and the client gets 503.
	t := conn.TCP(c)
	direct := t != nil && !conn.OverTLS(c) && len(pending) == 0
	var fd int
	var h *conn.Pump
	if direct {
		fd, err = conn.CopySocket(t)
	} else {
		h, fd, err = rs.app.rt.pumps.New(c)
	}
	if err != nil {
		io.WriteString(c, handOverFailed)
		c.Close()
		return -1, 0, err
	}
	if head != nil {
		if err := writeRawHead(brw.Writer, head, status); err != nil {
			syscall.Close(fd)
			if h != nil {
				h.Close()
			}
			c.Close()
			return -1, 0, err
		}
	}
	if direct {
		c.Close() // the socket stays open through the copy
		return fd, wire.FlagTcp, nil
	}
	h.Run(pending)
	return fd, 0, nil
}

// handOverFailed is the answer when the connection could not be handed
// over: the app hears why (an IOError), the client gets this.
const handOverFailed = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 20\r\nConnection: close\r\n\r\nService Unavailable\n"

// writeRawHead writes a response head (wire.h) as HTTP/1.1, as the app
// gave it: no framing is added, the bytes after it are the app's.
func writeRawHead(w *bufio.Writer, head []byte, status int) error {
	_, _, count, p, ok := wire.ResponseStart(head)
	if !ok {
		return errors.New("ruvoy: a malformed response head")
	}
	w.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	for i := 0; i < count; i++ {
		name, value, rest, ok := wire.ResponseHeader(p)
		if !ok {
			return errors.New("ruvoy: a malformed response head")
		}
		w.Write(name)
		w.WriteString(": ")
		w.Write(value)
		w.WriteString("\r\n")
		p = rest
	}
	w.WriteString("\r\n")
	return w.Flush()
}
