package ruvoycaddy

import (
	"io"
	"net"
)

// Go's HTTP/1 server sends a response body from a file with sendfile(2)
// only when the connection it writes to is an io.ReaderFrom all the way
// down to the *net.TCPConn. Each of ruvoy's connection wrappers passes
// ReadFrom on, so wrapping a connection keeps that path (the HTTP/1
// guard's does in internal/h1guard).

func (c *numberedConn) ReadFrom(r io.Reader) (int64, error) { return readFrom(c.Conn, r) }

func (c *drainConn) ReadFrom(r io.Reader) (int64, error) {
	if c.state.Load() != connDone {
		c.done() // as Write: an answer is under way
	}
	return readFrom(c.Conn, r)
}

func readFrom(c net.Conn, r io.Reader) (int64, error) {
	if rf, ok := c.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c}, r)
}

// writerOnly hides everything but Write, so io.Copy cannot come back here.
type writerOnly struct{ io.Writer }
