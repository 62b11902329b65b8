package h1guard

import (
	"net"
	"sync"

	"github.com/ruvoy/ruvoy/internal/conn"
)

// Config says how the guard reads.
type Config struct {
	// NoH2C refuses, with a 400, a cleartext connection that opens with
	// HTTP/2's preface: for a server that speaks no cleartext HTTP/2.
	NoH2C bool

	// MaxHeaderBytes is the server's http.Server.MaxHeaderBytes: the guard
	// holds no more of a head than Go would read (headLimit). 0: Caddy's
	// default, 16 KiB.
	MaxHeaderBytes int

	// BeforeTLS is called, once per listener, when a connection turns out
	// to carry a TLS handshake: the guard is under TLS (it wraps the
	// listener TLS wraps), and HTTPS requests pass it unguarded.
	BeforeTLS func()
}

// NewListener guards each connection l accepts.
func NewListener(l net.Listener, c Config) net.Listener {
	return &guardListener{Listener: l, noH2C: c.NoH2C, headLimit: headLimit(c.MaxHeaderBytes), beforeTLS: c.BeforeTLS}
}

type guardListener struct {
	net.Listener
	noH2C     bool
	headLimit int
	beforeTLS func()
	warnOnce  sync.Once // placed before tls: said once
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	if t, ok := c.(tlsState); ok {
		tc := &tlsGuardConn{guardConn{Conn: c, listener: l, overTLS: t, framer: framer{headLimit: l.headLimit}}}
		conn.Register(&tc.guardConn) // Caddy wraps it in a wrapper that does not say so
		return tc, nil
	}
	gc := &guardConn{Conn: c, listener: l, framer: framer{noH2C: l.noH2C, headLimit: l.headLimit}}
	conn.Register(gc)
	return gc, nil
}

// warnBeforeTLS says, once, that HTTPS requests pass unguarded.
func (l *guardListener) warnBeforeTLS() {
	if l == nil || l.beforeTLS == nil {
		return
	}
	l.warnOnce.Do(l.beforeTLS)
}
