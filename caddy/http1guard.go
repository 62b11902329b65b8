package ruvoycaddy

import (
	"bytes"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func init() {
	caddy.RegisterModule(HTTP1Guard{})
}

// HTTP1Guard is the listener wrapper caddy.listeners.ruvoy_http1_guard: it
// refuses, with 400 and a closed connection, the cleartext HTTP/1.x
// requests whose framing a proxy in front could read differently (request
// smuggling): Transfer-Encoding with Content-Length, Transfer-Encoding on
// HTTP/1.0, any Transfer-Encoding but a single "chunked", headers folded
// onto continuation lines (obs-fold), and Content-Length values that are not
// one number. Go's HTTP server accepts some of these by itself.
//
// It reads request heads before Go does and follows each message's framing
// to find the next one. A refused head reaches Go as a malformed request
// line, which Go answers with 400 and closes the connection after. TLS
// connections (placed before the tls wrapper, it sees their handshake) and
// HTTP/2 pass through untouched.
type HTTP1Guard struct{}

// CaddyModule returns the Caddy module information.
func (HTTP1Guard) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.ruvoy_http1_guard",
		New: func() caddy.Module { return new(HTTP1Guard) },
	}
}

// UnmarshalCaddyfile reads the wrapper's name; it takes no options
// (servers { listener_wrappers { ruvoy_http1_guard tls } }).
func (*HTTP1Guard) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// WrapListener guards each accepted connection.
func (HTTP1Guard) WrapListener(l net.Listener) net.Listener { return &guardListener{l} }

type guardListener struct{ net.Listener }

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &guardConn{Conn: c}, nil
}

// Past this much head without its end the guard steps aside: Go refuses
// heads that large itself.
const maxGuardedHead = 1 << 20

type guardState int

const (
	stateHead guardState = iota
	stateBody
	stateChunkSize
	stateChunkData
	stateChunkEnd
	stateTrailer
	statePassthrough
)

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

type guardConn struct {
	net.Conn
	state guardState
	in    []byte  // read from the connection, not yet handed to Go
	held  *[]byte // the pooled buffer in lives in; returned once in is empty
	ready int     // bytes of in that Go may have
	left  int64   // body or chunk bytes still to pass
	first bool    // the first bytes were seen
}

func (c *guardConn) Read(p []byte) (int, error) {
	for c.ready == 0 {
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
			if len(c.in) > 0 { // an incomplete head: let Go see it
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
	if len(c.in) == 0 {
		c.release()
	}
	return n, nil
}

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
			if rest[0] == 0x16 { // a TLS handshake
				c.state = statePassthrough
			}
		}
		switch c.state {
		case statePassthrough:
			c.ready = len(c.in)
		case stateHead:
			end := headEnd(rest)
			if end < 0 {
				if len(rest) > maxGuardedHead {
					c.state = statePassthrough
					continue
				}
				return // wait for the rest of the head
			}
			next, ok := checkHead(rest[:end])
			if !ok {
				// Go answers a request line it cannot parse with 400 and
				// closes the connection: hand it one.
				c.in = append(c.in[:c.ready], "REFUSED-BY-RUVOY\r\n\r\n"...)
				c.ready = len(c.in)
				c.state = statePassthrough
				return
			}
			c.ready += end
			c.state, c.left = next.state, next.length
		case stateBody, stateChunkData:
			n := int64(len(rest))
			if n > c.left {
				n = c.left
			}
			c.ready += int(n)
			c.left -= n
			if c.left == 0 {
				if c.state == stateBody {
					c.state = stateHead
				} else {
					c.state = stateChunkEnd
				}
			}
		case stateChunkSize, stateChunkEnd, stateTrailer:
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				if len(rest) > 4096 {
					c.state = statePassthrough // not chunked as we know it: Go decides
				}
				return
			}
			line := strings.TrimRight(string(rest[:i]), "\r")
			c.ready += i + 1
			switch c.state {
			case stateChunkEnd:
				c.state = stateChunkSize
			case stateTrailer:
				if line == "" {
					c.state = stateHead
				}
			case stateChunkSize:
				size, _, _ := strings.Cut(line, ";")
				n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
				switch {
				case err != nil || n < 0:
					c.state = statePassthrough // Go refuses a bad chunk itself
				case n == 0:
					c.state = stateTrailer
				default:
					c.state, c.left = stateChunkData, n
				}
			}
		}
	}
}

// headEnd is the length of the head at the start of b, through its blank
// line, or -1 while incomplete.
func headEnd(b []byte) int {
	if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
		if j := bytes.Index(b, []byte("\n\n")); j >= 0 && j < i {
			return j + 2
		}
		return i + 4
	}
	if j := bytes.Index(b, []byte("\n\n")); j >= 0 {
		return j + 2
	}
	return -1
}

type framing struct {
	state  guardState
	length int64
}

// checkHead judges a request head and says how its body is framed. It runs
// for every cleartext HTTP/1 request, so it reads the head in place and
// allocates nothing.
func checkHead(head []byte) (framing, bool) {
	request, rest, _ := bytes.Cut(bytes.TrimRight(head, "\r\n"), newline)
	request = bytes.TrimRight(request, "\r")
	if bytes.HasPrefix(request, h2Preface) {
		return framing{state: statePassthrough}, true
	}
	http10 := bytes.HasSuffix(request, http10Suffix)
	var te []byte
	var length int64 = -1
	tes, cls := 0, 0
	upgrade := false
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, newline)
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return framing{}, false // obs-fold
		}
		name, value, ok := bytes.Cut(line, colon)
		if !ok {
			continue // Go refuses it itself
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, transferEncoding):
			tes++
			te = value
		case bytes.EqualFold(name, contentLength):
			cls++
			n, ok := parseLength(value)
			if !ok || (length >= 0 && n != length) {
				return framing{}, false
			}
			length = n
		case bytes.EqualFold(name, upgradeHeader):
			upgrade = true
		}
	}
	next := framing{state: stateHead}
	switch {
	case tes > 0:
		if cls > 0 || http10 || tes != 1 || !bytes.EqualFold(te, chunked) {
			return framing{}, false
		}
		next.state = stateChunkSize
	case length > 0:
		next = framing{state: stateBody, length: length}
	}
	if upgrade && next.state == stateHead {
		// After a protocol switch (h2c, WebSocket) the bytes are not HTTP/1.
		next.state = statePassthrough
	}
	return next, true
}

var (
	newline          = []byte("\n")
	colon            = []byte(":")
	h2Preface        = []byte("PRI * HTTP/2.0")
	http10Suffix     = []byte(" HTTP/1.0")
	transferEncoding = []byte("Transfer-Encoding")
	contentLength    = []byte("Content-Length")
	upgradeHeader    = []byte("Upgrade")
	chunked          = []byte("chunked")
)

// parseLength reads a Content-Length value: decimal digits only, at least
// one, and small enough for an int64.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		d := int64(c - '0')
		if c < '0' || c > '9' || n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

var (
	_ caddy.ListenerWrapper = HTTP1Guard{}
	_ caddyfile.Unmarshaler = (*HTTP1Guard)(nil)
)
