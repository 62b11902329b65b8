package h1guard

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ruvoy/ruvoy/internal/conn"
)

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// guardConn is a guarded connection: Go reads through it what the framer
// let pass.
type guardConn struct {
	net.Conn
	framer
	listener *guardListener
	overTLS  tlsState // the TLS connection whose decrypted bytes it reads, or nil
	alpnDone bool     // overTLS: the handshake is done, the protocol known
	in       []byte   // read from the connection, not yet handed to Go
	held     *[]byte  // the pooled buffer in lives in; returned once in is empty
	ready    int      // bytes of in that Go may have
	first    bool     // the first bytes were seen
	tls      bool     // they were a TLS handshake: the bytes are not HTTP's
	// upgrade is set while the answer to a request with an Upgrade header
	// has not begun; switched once that answer was a 101 (Write sees it).
	upgrade, switched atomic.Bool
	answer            atomic.Int32   // a head was refused for its size: Go's 400 becomes this status
	handed            int64          // bytes handed to Go so far
	onHead            func(at int64) // a test hook: a head at this offset passed
}

// NetConn is the connection the guard reads from.
func (c *guardConn) NetConn() net.Conn { return c.Conn }

func (c *guardConn) Close() error {
	conn.Forget(c)
	return c.Conn.Close()
}

func (c *guardConn) Read(p []byte) (int, error) {
	if c.overTLS != nil && !c.alpnDone {
		if err := c.alpn(); err != nil {
			return 0, err
		}
	}
	for c.ready == 0 {
		if c.state == stateRefused {
			c.release()
			return 0, io.EOF
		}
		if c.state == statePassthrough && len(c.in) == 0 {
			return c.Conn.Read(p)
		}
		if (c.state == stateBody || c.state == stateChunkData) && c.left > 0 && len(c.in) == 0 && len(p) > 0 {
			return c.readBody(p)
		}
		n, err := c.Conn.Read(c.room())
		if n > 0 {
			c.in = c.in[:len(c.in)+n]
			c.advance()
		}
		if c.ready == 0 && err != nil {
			if len(c.in) > 0 && c.state == stateHead { // an incomplete head: let Go see it
				c.ready = len(c.in)
				break
			}
			c.release()
			return 0, err
		}
	}
	n := copy(p, c.in[:c.ready])
	c.in = c.in[n:]
	c.ready -= n
	c.handed += int64(n)
	if len(c.in) == 0 {
		c.release()
	}
	return n, nil
}

// Hijacked says the connection was handed to the app (rack.hijack): what
// follows is the app's protocol. It returns the bytes the guard read and
// Go did not take (Go reads no more once it hijacked), which are the
// app's too. Under TLS they are the TLS connection's, which reads on.
func (c *guardConn) Hijacked() []byte {
	if c.tls {
		return nil
	}
	c.switched.Store(true)
	c.state = statePassthrough
	held := append([]byte(nil), c.in...)
	c.ready = 0
	c.release()
	return held
}

// Write watches for the answer to an Upgrade request: after a 101 the
// connection carries another protocol.
func (c *guardConn) Write(p []byte) (int, error) {
	if code := c.answer.Load(); code != 0 && string(p) == goBadRequest {
		// Go's answer to a head refused for its size: the size's status.
		c.answer.Store(0)
		if _, err := io.WriteString(c.Conn, answers[code]); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if c.upgrade.Load() && bytes.HasPrefix(p, http1Prefix) {
		switch {
		case bytes.HasPrefix(p, switching):
			c.switched.Store(true)
			c.upgrade.Store(false)
		case !bytes.HasPrefix(p, informational): // a final answer: no switch
			c.upgrade.Store(false)
		}
	}
	return c.Conn.Write(p)
}

var (
	http1Prefix   = []byte("HTTP/1.")
	switching     = []byte("HTTP/1.1 101")
	informational = []byte("HTTP/1.1 1")
)

// ReadFrom passes on to the connection's own: Go's HTTP/1 server sends a
// file with sendfile(2) only when the connection it writes to is an
// io.ReaderFrom all the way down to the *net.TCPConn.
func (c *guardConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides everything but Write, so io.Copy cannot come back here.
type writerOnly struct{ io.Writer }

// room is free space after in: in a pooled buffer while in fits one (an
// idle connection holds none), in a larger array for a head that does not
// (the pooled one goes back once in is empty).
func (c *guardConn) room() []byte {
	if c.held == nil && len(c.in) == 0 {
		c.held = readBuffers.Get().(*[]byte)
		c.in = (*c.held)[:0]
	}
	if len(c.in) == cap(c.in) {
		c.in = append(make([]byte, 0, 2*max(len(c.in), 16<<10)), c.in...)
	}
	return c.in[len(c.in):cap(c.in)]
}

func (c *guardConn) release() {
	if c.held != nil {
		readBuffers.Put(c.held)
		c.held = nil
	}
	c.in = nil
}

// readBody reads body or chunk bytes straight into p, no further than the
// body or chunk goes: they need no look, and a copy through the guard's
// buffer would cost as much as the rest of an upload's path in Go.
func (c *guardConn) readBody(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	c.handed += int64(n)
	if c.left == 0 {
		if c.state == stateBody {
			c.state = stateHead
		} else {
			c.state = stateChunkEnd
		}
	}
	return n, err
}

// advance runs the framing machine over the bytes not yet handed out.
func (c *guardConn) advance() {
	for c.ready < len(c.in) {
		rest := c.in[c.ready:]
		if !c.first {
			c.first = true
			if rest[0] == 0x16 && c.overTLS == nil { // a TLS handshake: placed before tls
				c.state = statePassthrough
				c.tls = true
				c.listener.warnBeforeTLS()
			}
		}
		if c.switched.Load() {
			c.state = statePassthrough
		}
		switch c.state {
		case statePassthrough:
			c.ready = len(c.in)
			continue
		case statePreface:
			// Go's server would read anything else as an HTTP/1 request
			// (it serves HTTP/2 on this connection by its preface): a
			// client that chose h2 and sends another preface is dropped,
			// as Go's HTTP/2 server drops it over TLS.
			n := min(len(rest), len(http2Preface))
			if string(rest[:n]) != http2Preface[:n] {
				c.refuse("")
				return
			}
			if n == len(http2Preface) {
				c.state = statePassthrough
			}
			if n < len(http2Preface) {
				return // wait for more
			}
			continue
		case stateRefused:
			return
		}
		n, head, refusal := c.step(rest)
		if refusal == "" && head != nil && head.state == stateChunkSize && !chunksLookValid(rest[n:]) {
			// What already came of its chunked body is malformed: the head
			// is refused, and Go answers 400 before any handler runs.
			refusal = refusedHead
		}
		if refusal != "" {
			c.refuse(refusal)
			return
		}
		if n == 0 {
			return // wait for more
		}
		if head != nil {
			if c.onHead != nil {
				c.onHead(c.handed + int64(c.ready))
			}
			if head.upgrade {
				c.upgrade.Store(true)
			}
		}
		c.ready += n
	}
}
