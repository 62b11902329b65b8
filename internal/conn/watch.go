package conn

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How the request path tells that a client has gone while its request is
// waited on.
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

// A Conn is a server connection as the request path follows it: the
// connection as the server has it, and the TCP socket under its wrappers,
// found once, when first needed.
type Conn struct {
	net.Conn
	tcp atomic.Pointer[net.TCPConn]
}

// TCP is the TCP connection under c's wrappers, or nil.
func (c *Conn) TCP() *net.TCPConn {
	if t := c.tcp.Load(); t != nil {
		return t
	}
	t := TCP(c.Conn)
	if t != nil {
		c.tcp.Store(t)
	}
	return t
}

// A Watch follows one request's client: wait on Fin, Probe and Gone, and
// call FinSeen and SendProbe when the first two fire. Its methods run on
// the handler's goroutine: the probe writes to the ResponseWriter.
type Watch struct {
	Fin   <-chan struct{}  // HTTP/1.1: the request's context ended (a FIN, or a read error)
	Probe <-chan time.Time // after a FIN: when to send the probe
	Gone  <-chan struct{}  // closed once the client is known to have gone
	conn  *Conn
	tcp   *net.TCPConn
}

// WatchClient watches r's client; c is r's connection, or nil.
func WatchClient(r *http.Request, c *Conn) Watch {
	if r.ProtoMajor != 1 {
		return Watch{Gone: r.Context().Done()}
	}
	if r.ProtoMinor == 0 || c == nil {
		return Watch{} // a failed write tells
	}
	return Watch{Fin: r.Context().Done(), conn: c}
}

// FinSeen follows a FIN: a connection already reset is gone; otherwise a
// probe follows if the answer takes long.
func (cw *Watch) FinSeen() {
	cw.Fin = nil
	if cw.tcp = cw.conn.TCP(); cw.tcp == nil {
		return // not TCP under its wrappers: a failed write tells
	}
	if PeerReset(cw.tcp) {
		cw.Gone = closed
		return
	}
	cw.Probe = time.After(probeDelay)
}

// SendProbe writes the interim answer (before any head of the response)
// and watches for the reset a closed socket answers it with.
func (cw *Watch) SendProbe(w http.ResponseWriter) {
	cw.Probe = nil
	w.WriteHeader(http.StatusContinue)
	gone := make(chan struct{})
	cw.Gone = gone
	go func(tcp *net.TCPConn) {
		for deadline := time.Now().Add(probeWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if PeerReset(tcp) {
				close(gone)
				return
			}
		}
	}(cw.tcp)
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// PeerReset reports whether the connection was reset by its peer.
func PeerReset(tcp *net.TCPConn) bool {
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
