package h1guard

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"testing"
)

// tlsScripted is a TLS connection whose client chose protocol by ALPN.
type tlsScripted struct {
	scripted
	protocol string
}

func (c *tlsScripted) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{NegotiatedProtocol: c.protocol, HandshakeComplete: true}
}

// After tls, the guard reads the decrypted bytes: HTTP/1 as on cleartext,
// whatever ALPN chose but h2, which passes untouched; HTTP/2's preface on
// a connection that did not choose h2 is refused.
func TestGuardOverTLS(t *testing.T) {
	smuggled := "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	preface := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04"
	for _, tc := range []struct{ protocol, in, want string }{
		{"http/1.1", smuggled, refusedHead},
		{"", smuggled, refusedHead},
		{"http/1.0", "GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\n\r\n"},
		{"h2", preface + smuggled, preface + smuggled},
		{"h2", "GET / HTTP/1.1\r\n\r\n", ""}, // not HTTP/2's preface: dropped
		{"http/1.1", preface, refusedHead},
	} {
		l := &guardListener{Listener: &oneConn{&tlsScripted{scripted: scripted{data: []byte(tc.in)}, protocol: tc.protocol}}}
		c, _ := l.Accept()
		if _, ok := c.(tlsState); !ok {
			t.Fatalf("the guarded TLS connection does not tell its TLS state")
		}
		out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
		if string(out) != tc.want {
			t.Errorf("ALPN %q, %q: Go got %q, want %q", tc.protocol, tc.in, out, tc.want)
		}
	}
}

// oneConn is a listener that accepts one connection.
type oneConn struct{ c net.Conn }

func (l *oneConn) Accept() (net.Conn, error) { return l.c, nil }
func (l *oneConn) Close() error              { return nil }
func (l *oneConn) Addr() net.Addr            { return nil }
