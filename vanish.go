package ruvoy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How ruvoy tells that a client has gone while its request is waited on.
//
// On HTTP/2 and 3 the request's context ends when the client resets the
// stream or the connection goes. On HTTP/1 it also ends when the client
// merely half-closes: a FIN after a whole request says it will send no
// more, not that it stopped reading, and Go's background read cannot tell
// the two apart. They differ only once the server sends something: a
// closed socket answers data with a reset. So when the answer is not ready
// probeDelay after a FIN, an HTTP/1.1 client is sent an interim
// "100 Continue" (every HTTP/1.1 client must accept 1xx answers before the
// final one; HTTP/1.0 ones get none), and the connection's TCP state tells,
// within probeWait, whether a reset came back. A client that left is then
// treated as gone: its request is cancelled. One that half-closed gets its
// answer when it is ready.
const (
	probeDelay = 200 * time.Millisecond
	probeWait  = time.Second
)

type connKey struct{}

// connInfo is what ruvoy keeps about a server connection: the connection,
// to watch it, and how many of its requests its client left while Ruby
// still unwinds them (admission bounds them).
type connInfo struct {
	conn    net.Conn
	orphans atomic.Int32
	places  connPlaces                  // its requests in Ruby (HTTP/2 and 3)
	tcp     atomic.Pointer[net.TCPConn] // found once, when first needed
}

// tcpConn is the TCP connection under the server connection, or nil.
func (c *connInfo) tcpConn() *net.TCPConn {
	if t := c.tcp.Load(); t != nil {
		return t
	}
	t := tcpConn(c.conn)
	if t != nil {
		c.tcp.Store(t)
	}
	return t
}

// WithConn records a server connection in its context, for the handler to
// watch (the Caddy module sets it for every connection it serves).
func WithConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connInfo{conn: c})
}

func connOf(r *http.Request) *connInfo {
	c, _ := r.Context().Value(connKey{}).(*connInfo)
	return c
}

// clientWatch follows one request's client. Its methods run on the
// handler's goroutine: probe writes to the ResponseWriter.
type clientWatch struct {
	fin   <-chan struct{}  // HTTP/1.1: the request's context ended (a FIN, or a read error)
	probe <-chan time.Time // after a FIN: when to send the probe
	gone  <-chan struct{}  // closed once the client is known to have gone
	conn  *connInfo
	tcp   *net.TCPConn
}

// watchClient watches r's client; c is r's connection (connOf), or nil.
func watchClient(r *http.Request, c *connInfo) clientWatch {
	if r.ProtoMajor != 1 {
		return clientWatch{gone: r.Context().Done()}
	}
	if r.ProtoMinor == 0 || c == nil {
		return clientWatch{} // a failed write tells
	}
	return clientWatch{fin: r.Context().Done(), conn: c}
}

// finSeen follows a FIN: a connection already reset is gone; otherwise a
// probe follows if the answer takes long.
func (cw *clientWatch) finSeen() {
	cw.fin = nil
	if cw.tcp = cw.conn.tcpConn(); cw.tcp == nil {
		return // not TCP under its wrappers: a failed write tells
	}
	if tcpClosed(cw.tcp) {
		cw.gone = closed
		return
	}
	cw.probe = time.After(probeDelay)
}

// sendProbe writes the interim answer (before any head of the response)
// and watches for the reset a closed socket answers it with.
func (cw *clientWatch) sendProbe(w http.ResponseWriter) {
	cw.probe = nil
	w.WriteHeader(http.StatusContinue)
	gone := make(chan struct{})
	cw.gone = gone
	go func(tcp *net.TCPConn) {
		for deadline := time.Now().Add(probeWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if tcpClosed(tcp) {
				close(gone)
				return
			}
		}
	}(cw.tcp)
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// tcpClosed reports whether the connection was reset by its peer.
func tcpClosed(tcp *net.TCPConn) bool {
	raw, err := tcp.SyscallConn()
	if err != nil {
		return true
	}
	state := uint8(0)
	raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	})
	return state == tcpStateClose
}

// tcpStateClose is Linux's TCP_CLOSE: what a socket becomes on a reset.
const tcpStateClose = 7
