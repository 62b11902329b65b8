// Package conn is the connection plumbing under the request path: finding
// the client's socket under the server's connection wrappers, telling a
// client that left from one that half-closed (watch.go), ending a
// connection with a reset, handing a hijacked connection to the app or
// pumping its bytes (pump.go), and sending a file as a response body with
// sendfile(2) (file.go). It knows neither the VM nor the wire.
package conn

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"

	"golang.org/x/sys/unix"
)

// An Unwrapper is a connection wrapper that says what it wraps, as
// *tls.Conn does and ruvoy's listener wrappers do.
type Unwrapper interface {
	NetConn() net.Conn
}

// accepted holds, while it is open, each connection ruvoy's listener
// wrappers handed on (Register), under its addresses: Caddy's own wrappers
// (over TLS, its tlsStateConn) say nothing of what they wrap, and Each
// looks under them through here.
var accepted sync.Map // "remote|local" -> net.Conn

// key names a TCP connection by its addresses, which no other open
// connection shares; "" for any other (a unix socket's peers have none).
func key(c net.Conn) string {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	return remote.String() + "|" + local.String()
}

// Register records c, which a listener wrapper hands on, until Forget:
// the outermost of ruvoy's wrappers registers last, and is found.
func Register(c net.Conn) {
	if k := key(c); k != "" {
		accepted.Store(k, c)
	}
}

// Forget drops c (closed).
func Forget(c net.Conn) {
	if k := key(c); k != "" {
		accepted.CompareAndDelete(k, c)
	}
}

// Each calls f with c and each connection c wraps, outermost first,
// following Unwrapper; where a wrapper does not say (Caddy's), the
// connection a ruvoy wrapper registered under the same addresses.
func Each(c net.Conn, f func(net.Conn)) {
	for range 8 {
		if c == nil {
			return
		}
		f(c)
		if u, ok := c.(Unwrapper); ok {
			c = u.NetConn()
			continue
		}
		if _, tcp := c.(*net.TCPConn); tcp {
			return
		}
		k := key(c)
		if k == "" {
			return
		}
		inner, ok := accepted.Load(k)
		if !ok || inner.(net.Conn) == c {
			return
		}
		c = inner.(net.Conn)
	}
}

// TCP finds the TCP connection under a server connection's wrappers, or
// nil.
func TCP(c net.Conn) *net.TCPConn {
	var found *net.TCPConn
	Each(c, func(c net.Conn) {
		if t, ok := c.(*net.TCPConn); ok && found == nil {
			found = t
		}
	})
	return found
}

// OverTLS says whether c is, or wraps, a TLS connection: tls.Conn reads
// ahead of what it returns, so its socket's readability says nothing.
func OverTLS(c net.Conn) bool {
	found := false
	Each(c, func(c net.Conn) {
		if _, ok := c.(*tls.Conn); ok {
			found = true
		}
	})
	return found
}

// A Handover is a listener wrapper that reads ahead (the HTTP/1 guard):
// when its connection is hijacked, it stops reading HTTP and gives back
// the bytes it holds, which are the app's.
type Handover interface {
	Hijacked() []byte
}

// HandOver tells the wrappers of a hijacked connection that read ahead to
// stop, and returns the bytes they held.
func HandOver(c net.Conn) []byte {
	var held []byte
	Each(c, func(c net.Conn) {
		if h, ok := c.(Handover); ok {
			held = append(held, h.Hijacked()...)
		}
	})
	return held
}

// CopySocket copies the client's socket's descriptor (cleartext, nothing
// read ahead) for the app, which then reads and writes it itself: once
// the server's connection is closed (its wrappers' counts with it), the
// socket lives on through the copy and costs Go nothing. It stays
// non-blocking: the flag belongs to the socket, which Go set.
func CopySocket(t *net.TCPConn) (int, error) {
	raw, err := t.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if cerr := raw.Control(func(s uintptr) {
		fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil {
		err = cerr
	}
	return fd, err
}

// Abort takes the connection under w from the server and closes it with
// a TCP reset. It reports false when the connection could not be taken.
func Abort(w http.ResponseWriter) bool {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if tcp := TCP(c); tcp != nil {
		_ = tcp.SetLinger(0)
		_ = tcp.Close() // before the wrappers: TLS would first say close_notify
	}
	_ = c.Close()
	return true
}
