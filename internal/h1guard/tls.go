package h1guard

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"time"
)

// tlsState is a TLS connection (*tls.Conn, under Caddy's tls wrapper):
// Caddy and Go's server take a connection that has it for one over TLS.
type tlsState interface {
	ConnectionState() tls.ConnectionState
}

// tlsGuardConn guards a TLS connection's decrypted bytes, and is one over
// TLS to those above it.
type tlsGuardConn struct{ guardConn }

func (c *tlsGuardConn) ConnectionState() tls.ConnectionState { return c.overTLS.ConnectionState() }

// alpn decides, once the handshake is done, what the guard reads: a
// connection whose client chose HTTP/2 passes; any other is HTTP/1's,
// where HTTP/2's preface is refused.
func (c *guardConn) alpn() error {
	c.alpnDone = true
	if h, ok := c.Conn.(interface{ HandshakeContext(context.Context) error }); ok {
		if err := h.HandshakeContext(context.Background()); err != nil {
			refusePlainHTTP(err)
			return err
		}
	}
	if c.overTLS.ConnectionState().NegotiatedProtocol == "h2" {
		c.state = statePreface
	} else {
		c.noH2C = true
	}
	return nil
}

// refusePlainHTTP answers a client that spoke plain HTTP to the TLS port
// as Go's server (and so Caddy without the guard, and nginx) does: 400 and
// a sentence. Go's server would, but with the guard above tls it does not
// see the handshake fail.
func refusePlainHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil {
		return
	}
	switch string(re.RecordHeader[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		re.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		re.Conn.Close()
	}
}
