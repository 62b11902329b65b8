package ruvoycaddy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/conn"
)

func init() {
	caddy.RegisterModule(HTTP1Guard{})
}

// HTTP1Guard is the listener wrapper caddy.listeners.ruvoy_http1_guard: it
// refuses, with 400 and a closed connection, the cleartext HTTP/1.x
// requests whose framing a proxy in front could read differently (request
// smuggling): Transfer-Encoding with Content-Length, Transfer-Encoding on
// HTTP/1.0, any Transfer-Encoding but a single "chunked", headers folded
// onto continuation lines (obs-fold), Content-Length values that are not
// one number, and chunked bodies that are not framed exactly as RFC 9112
// says (a size that is not 1 to 16 hex digits, a chunk not followed by
// CRLF, a bare LF or CR, a trailer line that is not a header). Go's HTTP
// server accepts some of these by itself.
//
// It reads request heads before Go does and follows each message's framing
// to find the next one. A refused head reaches Go as a malformed request
// line, which Go answers with 400, closing the connection after; a refused
// chunk line reaches Go as a malformed one, which ruvoy's handler answers
// with 400 and a closed connection. Nothing after a refusal reaches Go.
// After a 101 answer to an Upgrade request the bytes are another
// protocol's and pass. HTTP/2 passes through untouched.
//
// Placed after the tls wrapper (listener_wrappers { ... tls
// ruvoy_http1_guard }), it reads the decrypted bytes of HTTPS connections
// too, and holds them to the same rules: a connection whose client chose
// HTTP/2 by ALPN passes; any other must speak HTTP/1. Placed before tls,
// it sees TLS connections' handshakes and lets them pass unguarded (it
// says so in the log once).
type HTTP1Guard struct {
	// NoH2C closes, with a 400, a connection that opens with HTTP/2's
	// preface. ruvoy's own config sets it when cleartext HTTP/2 is off: it
	// lists h2c among the server's protocols all the same, since with h1
	// alone Caddy wraps each connection in one that hides ReadFrom, and Go
	// then sends no file with sendfile(2).
	NoH2C bool `json:"no_h2c,omitempty"`

	logger         *zap.Logger
	maxHeaderBytes int // the server's (its max_header_size), read at Provision
}

// CaddyModule returns the Caddy module information.
func (HTTP1Guard) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.ruvoy_http1_guard",
		New: func() caddy.Module { return new(HTTP1Guard) },
	}
}

// Provision records the guard for the handler's check (warnMissingWrappers)
// and reads the server's header limit, which Caddy has set by then.
func (g *HTTP1Guard) Provision(ctx caddy.Context) error {
	noteWrapper(ctx, "ruvoy_http1_guard")
	g.logger = ctx.Logger()
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		g.maxHeaderBytes = srv.MaxHeaderBytes
	}
	return nil
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
func (g HTTP1Guard) WrapListener(l net.Listener) net.Listener {
	return &guardListener{Listener: l, noH2C: g.NoH2C, headLimit: headLimit(g.maxHeaderBytes), logger: g.logger}
}

type guardListener struct {
	net.Listener
	noH2C     bool
	headLimit int
	logger    *zap.Logger
	warnOnce  sync.Once // placed before tls: said once
}

// tlsState is a TLS connection (*tls.Conn, under the tls wrapper): Caddy
// and Go's server take a connection that has it for one over TLS.
type tlsState interface {
	ConnectionState() tls.ConnectionState
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

// defaultMaxHeaderBytes is the server's header limit when Caddy did not
// say (a guard outside a server): Caddy's own default for max_header_size
// (caddyhttp.App.Provision), which it gives Go's server as MaxHeaderBytes.
const defaultMaxHeaderBytes = 16 << 10

// headLimit is how much of a request head Go's server reads before it
// answers 431: its MaxHeaderBytes, and the 4 KiB more net/http allows for
// its read buffer (Server.initialReadLimitSize). Past as much head without
// its end, the guard refuses it at once: it holds no more than Go would,
// and the client hears 431 as soon as Caddy alone would tell it (before,
// the guard took up to 1 MiB and waited for the header timeout).
func headLimit(maxHeaderBytes int) int {
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = defaultMaxHeaderBytes
	}
	return maxHeaderBytes + 4096
}

// warnBeforeTLS says, once, that HTTPS requests pass unguarded.
func (l *guardListener) warnBeforeTLS() {
	if l == nil || l.logger == nil {
		return
	}
	l.warnOnce.Do(func() {
		l.logger.Warn("ruvoy_http1_guard is placed before tls: HTTPS requests reach Go's parser unguarded (request smuggling shapes); place it after tls",
			zap.String("listener_wrappers", "ruvoy_drain ruvoy_connection_ids tls ruvoy_http1_guard"))
	})
}

// Limits of the chunked framing, as Go's reader has them: a chunk-size line
// of 4 KiB, a trailer section of 4 KiB.
const (
	maxChunkLine = 4096
	maxTrailer   = 4096
)

type guardState int

const (
	stateHead guardState = iota
	stateBody
	stateChunkSize
	stateChunkData
	stateChunkEnd
	stateTrailer
	statePassthrough
	statePreface // over TLS, with h2 chosen: HTTP/2's preface, then passthrough
	stateRefused // a refusal was handed to Go: nothing more is read
)

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

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

// refuse hands Go, after what it may already have, bytes it cannot parse
// where it reads next (a request line, a chunk-size line, the CRLF after a
// chunk, a trailer line), and nothing after them.
func (c *guardConn) refuse(marker string) {
	switch marker {
	case refusedLongURI:
		c.answer.Store(http.StatusRequestURITooLong)
	case refusedLongHead:
		c.answer.Store(http.StatusRequestHeaderFieldsTooLarge)
	}
	c.in = append(c.in[:c.ready], marker...)
	c.ready = len(c.in)
	c.state = stateRefused
}

const (
	refusedHead = "REFUSED-BY-RUVOY\r\n\r\n"
	refusedBody = "\x00REFUSED-BY-RUVOY\r\n\r\n"
	// Heads over the limit (headLimit): Go answers these 400 as any
	// refused head, and Write turns that answer into the status RFC 9112
	// wants.
	refusedLongURI  = "REFUSED-BY-RUVOY-414\r\n\r\n"
	refusedLongHead = "REFUSED-BY-RUVOY-431\r\n\r\n"
)

// goBadRequest is Go's answer to a request it cannot parse (net/http's
// conn.serve), which a refused head gets.
const goBadRequest = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"

// answers are what Write sends in place of goBadRequest after a head
// refused for its size.
var answers = map[int32]string{
	http.StatusRequestURITooLong:           "HTTP/1.1 414 URI Too Long\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n414 URI Too Long",
	http.StatusRequestHeaderFieldsTooLarge: "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large",
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

// framer follows HTTP/1 request framing: where heads, bodies and chunks
// begin and end.
type framer struct {
	state     guardState
	left      int64 // body or chunk bytes still to come
	scanned   int   // bytes already searched for a line or the head's end
	trailer   int   // trailer bytes seen so far
	noH2C     bool  // HTTP/2's preface is refused (HTTP1Guard.NoH2C)
	headLimit int   // the most head it takes (headLimit); 0: the default's
}

// step reads what comes next in b, which starts where the framing stands.
// It returns how many bytes that was (0: it needs more bytes), with the
// framing it found when those bytes were a head, or the refusal to hand Go
// when they break the rules.
func (f *framer) step(b []byte) (n int, head *framing, refusal string) {
	switch f.state {
	case stateHead:
		end, scanned := headEnd(b, f.scanned)
		f.scanned = scanned
		if end < 0 {
			limit := f.headLimit
			if limit <= 0 {
				limit = headLimit(0)
			}
			if len(b) > limit {
				if bytes.IndexByte(b[:limit], '\n') < 0 {
					return 0, nil, refusedLongURI // the request line alone
				}
				return 0, nil, refusedLongHead
			}
			return 0, nil, ""
		}
		next, ok := checkHead(b[:end])
		if !ok || next.state == statePassthrough && f.noH2C {
			// Go answers a request line it cannot parse with 400 and
			// closes the connection: hand it one.
			return 0, nil, refusedHead
		}
		f.state, f.left, f.trailer = next.state, next.length, 0
		return end, &next, ""
	case stateBody, stateChunkData:
		n := int(min(int64(len(b)), f.left))
		f.left -= int64(n)
		if f.left == 0 {
			if f.state == stateBody {
				f.state = stateHead
			} else {
				f.state = stateChunkEnd
			}
		}
		return n, nil, ""
	case stateChunkEnd:
		if len(b) < 2 {
			return 0, nil, ""
		}
		if b[0] != '\r' || b[1] != '\n' {
			return 0, nil, refusedBody
		}
		f.state = stateChunkSize
		return 2, nil, ""
	}
	// stateChunkSize, stateTrailer: a line.
	line, ok, complete := chunkLine(b, f.scanned)
	if !complete {
		f.scanned = len(b)
		limit := maxChunkLine
		if f.state == stateTrailer {
			limit = maxTrailer - f.trailer
		}
		if len(b) > limit {
			return 0, nil, refusedBody
		}
		return 0, nil, ""
	}
	f.scanned = 0
	if !ok || len(line) >= maxChunkLine {
		return 0, nil, refusedBody
	}
	n = len(line) + 2
	if f.state == stateTrailer {
		f.trailer += n
		switch {
		case len(line) == 0:
			f.state = stateHead
		case f.trailer > maxTrailer || !trailerLine(line):
			return 0, nil, refusedBody
		}
		return n, nil, ""
	}
	size, ok := chunkSize(line)
	if !ok {
		return 0, nil, refusedBody
	}
	if size == 0 {
		f.state = stateTrailer
	} else {
		f.state, f.left = stateChunkData, size
	}
	return n, nil, ""
}

// chunksLookValid follows the chunked body at the start of b as far as b
// goes, and reports false when what is there breaks the framing.
func chunksLookValid(b []byte) bool {
	f := framer{state: stateChunkSize}
	for len(b) > 0 && f.state != stateHead {
		n, _, refusal := f.step(b)
		if refusal != "" {
			return false
		}
		if n == 0 {
			return true
		}
		b = b[n:]
	}
	return true
}

// chunkLine finds the line at the start of b (no LF before from): complete
// once its LF is there, ok when it ends in CRLF with no other CR (RFC 9112 allows no bare
// LF in chunked framing, and no bare CR anywhere). line is without CRLF.
func chunkLine(b []byte, from int) (line []byte, ok, complete bool) {
	i := bytes.IndexByte(b[from:], '\n')
	if i < 0 {
		return nil, false, false
	}
	i += from
	if i == 0 || b[i-1] != '\r' || bytes.IndexByte(b[:i-1], '\r') >= 0 {
		return nil, false, true
	}
	return b[:i-1], true, true
}

// chunkSize reads a chunk-size line as Go's chunked reader does: trailing
// spaces and tabs dropped, an extension after ";" ignored, then 1 to 16 hex
// digits and nothing else.
func chunkSize(line []byte) (int64, bool) {
	line = bytes.TrimRight(line, " \t")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || len(line) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// trailerLine accepts a trailer field line: a token, a colon, a value
// without control characters but tab.
func trailerLine(line []byte) bool {
	name, value, ok := bytes.Cut(line, colon)
	if !ok || len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !isTokenChar(c) {
			return false
		}
	}
	for _, c := range value {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

// headEnd is the length of the head at the start of b, through the empty
// line that ends it, or -1 while incomplete; then scanned is where the
// last, incomplete line starts, to resume from when more bytes come (a head
// that arrives a byte at a time costs no more than one that comes whole).
// Lines end in LF, with or without a CR before it, as Go's reader takes
// them: the head ends at the first line that is empty or a lone CR,
// whatever ends the lines before.
func headEnd(b []byte, from int) (end, scanned int) {
	for start := from; start < len(b); {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1, start
		}
		if start > 0 && (i == 0 || (i == 1 && b[start] == '\r')) {
			return start + i + 1, 0
		}
		start += i + 1
	}
	return -1, len(b)
}

type framing struct {
	state   guardState
	length  int64
	upgrade bool // the request asks to switch protocols (Upgrade)
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
	// After a protocol switch (a 101 answer, see Write) the bytes are not
	// HTTP/1; until then the request is framed as any other.
	next.upgrade = upgrade
	return next, true
}

// http2Preface is what an HTTP/2 client sends first (RFC 9113 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

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
	_ caddy.Provisioner     = (*HTTP1Guard)(nil)
	_ caddyfile.Unmarshaler = (*HTTP1Guard)(nil)
)
