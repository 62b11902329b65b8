package ruvoycaddy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// checkHead's verdicts, head by head; the e2e tests (test/ship_test.go)
// send such requests to the real binary.
func TestCheckHead(t *testing.T) {
	refused := framing{}
	cases := []struct {
		name, head string
		want       framing
		ok         bool
	}{
		{"no body", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", framing{state: stateHead}, true},
		{"content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", framing{state: stateBody, length: 12}, true},
		{"lower-case name, spaces", "POST / HTTP/1.1\r\ncontent-length:   7 \r\n\r\n", framing{state: stateBody, length: 7}, true},
		{"zero length", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", framing{state: stateHead}, true},
		{"equal lengths twice", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", framing{state: stateBody, length: 5}, true},
		{"different lengths", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", refused, false},
		{"length list", "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", refused, false},
		{"signed length", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", refused, false},
		{"empty length", "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", refused, false},
		{"largest length", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n", framing{state: stateBody, length: 1<<63 - 1}, true},
		{"length overflows", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", refused, false},
		{"chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", framing{state: stateChunkSize}, true},
		{"chunked, any case", "POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n", framing{state: stateChunkSize}, true},
		{"chunked and length", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", refused, false},
		{"chunked on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", refused, false},
		{"two codings", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", refused, false},
		{"two headers", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", refused, false},
		{"obs-fold", "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", refused, false},
		{"bare LF lines", "POST / HTTP/1.1\nContent-Length: 3\n\n", framing{state: stateBody, length: 3}, true},
		{"upgrade", "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", framing{state: stateHead, upgrade: true}, true},
		{"upgrade with a body", "POST / HTTP/1.1\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\n", framing{state: stateBody, length: 2, upgrade: true}, true},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\n", framing{state: statePassthrough}, true},
		{"line without colon", "GET / HTTP/1.1\r\nnonsense\r\n\r\n", framing{state: stateHead}, true},
	}
	for _, c := range cases {
		got, ok := checkHead([]byte(c.head))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// The check runs for every cleartext HTTP/1 request: it must not allocate.
func TestCheckHeadAllocates(t *testing.T) {
	head := []byte("POST /upload HTTP/1.1\r\nHost: example.com\r\nUser-Agent: " + strings.Repeat("x", 100) +
		"\r\nContent-Type: text/plain\r\nContent-Length: 262144\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { checkHead(head) }); n != 0 {
		t.Fatalf("checkHead allocated %v times per head", n)
	}
}

// scripted is a connection that reads what it was given, in pieces of the
// sizes given (cycled), then EOF; what is written to it is kept.
type scripted struct {
	net.Conn
	data    []byte
	pieces  []int
	i       int
	written bytes.Buffer
}

func (c *scripted) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.pieces) > 0 {
		n = min(n, c.pieces[c.i%len(c.pieces)])
		c.i++
	}
	n = copy(p[:min(len(p), n)], c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *scripted) Write(p []byte) (int, error) { return c.written.Write(p) }
func (c *scripted) RemoteAddr() net.Addr        { return &net.TCPAddr{Port: 40000} }
func (c *scripted) LocalAddr() net.Addr         { return &net.TCPAddr{Port: 8080} }
func (c *scripted) Close() error                { return nil }

// guarded is what Go reads through the guard from a client that sends in,
// read in pieces of the given sizes by a reader with a 4 KiB buffer.
func guarded(in string, pieces ...int) string {
	c := &guardConn{Conn: &scripted{data: []byte(in), pieces: pieces}}
	out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
	return string(out)
}

// The chunked framing the guard passes and refuses; a refused body reaches
// Go as a line it cannot parse, and nothing after it does.
func TestGuardChunkedFraming(t *testing.T) {
	head := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	next := "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
	passed := []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;ext=1\r\nhello\r\n0\r\n\r\n",
		"5 \t\r\nhello\r\n0\r\n\r\n",
		"A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n",
		"000000000000005\r\nhello\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\nX-Trailer: yes\r\nOther: a\tb\r\n\r\n",
	}
	for _, body := range passed {
		for _, pieces := range [][]int{nil, {1}, {3, 7}} {
			if got := guarded(head+body+next, pieces...); got != head+body+next {
				t.Errorf("%q in pieces %v: got %q, want it passed whole", body, pieces, got)
			}
		}
	}
	refused := []struct{ body, passed string }{
		{"Z\r\nhello\r\n0\r\n\r\n", ""},
		{"-5\r\nhello\r\n0\r\n\r\n", ""},
		{"0x5\r\nhello\r\n0\r\n\r\n", ""},
		{"00000000000000005\r\nhello\r\n0\r\n\r\n", ""}, // 17 digits
		{"5 ;ext\r\nhello\r\n0\r\n\r\n", ""},
		{"\r\nhello\r\n0\r\n\r\n", ""},
		{"5\nhello\r\n0\r\n\r\n", ""},         // bare LF
		{"5\r\r\nhello\r\n0\r\n\r\n", ""},     // bare CR
		{"5\r\nhello0\r\n\r\n", "5\r\nhello"}, // no CRLF after the data
		{"3\r\nabcXX0\r\n\r\n", "3\r\nabc"},   // other bytes after the data
		{"5\r\nhello\r\n0\r\nno colon\r\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5\r\nhello\r\n0\r\n folded: x\r\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5\r\nhello\r\n0\r\nX: a\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n", ""},
		{"5\r\nhello\r\n0\r\n" + strings.Repeat("X-A: b\r\n", 600) + "\r\n", "5\r\nhello\r\n0\r\n" + strings.Repeat("X-A: b\r\n", 512)},
	}
	// A body that comes with its head is judged with it: the head is
	// refused, and no handler runs. One that comes later is refused where
	// it breaks the rules.
	for _, c := range refused {
		for _, pieces := range [][]int{nil, {1}, {3, 7}} {
			got := guarded(head+c.body+next, pieces...)
			if got != refusedHead && got != head+c.passed+refusedBody {
				t.Errorf("%.40q in pieces %v: got %.120q, want the head refused or %.120q", c.body, pieces, got, head+c.passed+refusedBody)
			}
			if pieces == nil && got != refusedHead {
				t.Errorf("%.40q, whole: got %.120q, want the head refused", c.body, got)
			}
		}
	}
}

// A refused head, and everything after it, never reaches Go as a request.
func TestGuardRefusedHeadEndsTheStream(t *testing.T) {
	in := "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabcGET /smuggled HTTP/1.1\r\n\r\n"
	if got := guarded(in); got != refusedHead {
		t.Fatalf("got %q, want %q", got, refusedHead)
	}
}

// Requests with an Upgrade header stay guarded unless the answer switched
// protocols; after a 101 the bytes pass as they come.
func TestGuardUpgrade(t *testing.T) {
	up := "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	smuggle := "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"

	// Not switched: the next head is checked.
	conn := &scripted{data: []byte(up)}
	c := &guardConn{Conn: conn}
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	if string(buf[:n]) != up {
		t.Fatalf("first read: %q", buf[:n])
	}
	c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	conn.data = []byte(smuggle)
	rest, _ := io.ReadAll(c)
	if string(rest) != refusedHead {
		t.Fatalf("after a 200: got %q, want the refusal", rest)
	}

	// Switched: frames pass, whatever they look like.
	frames := "\x81\x05hello" + smuggle
	conn = &scripted{data: []byte(up)}
	c = &guardConn{Conn: conn}
	n, _ = c.Read(buf)
	c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
	c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"))
	conn.data = []byte(frames)
	rest, _ = io.ReadAll(c)
	if string(rest) != frames {
		t.Fatalf("after a 101: got %q, want %q", rest, frames)
	}
}

// FuzzGuard feeds arbitrary client bytes through the guard, read in
// arbitrary pieces, and checks that
//   - Go gets a prefix of what the client sent, then at most a refusal;
//   - the pieces the bytes arrive in change only where a refusal comes
//     (a body that came with its head is judged with it), not whether;
//   - every request head Go's own parser finds in what the guard passed
//     starts where the guard checked a head: the two never disagree on
//     where a request begins, so no head reaches Go unchecked.
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\nGET /followup HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n y\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\nGET / HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(seed), uint8(0), uint8(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		heads := map[int64]bool{}
		c := &guardConn{Conn: &scripted{data: in}, onHead: func(at int64) { heads[at] = true }}
		out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
		whole := string(out)
		split := guarded(string(in), int(a)%64+1, int(b)%64+1)
		// A refusal is bytes the client did not send.
		refused := func(out string) bool { return !strings.HasPrefix(string(in), out) }
		if refused(whole) != refused(split) {
			t.Fatalf("the pieces changed whether the guard refuses:\nwhole %q\nsplit %q", whole, split)
		}
		passed := whole
		if !strings.HasPrefix(string(in), whole) {
			for _, marker := range []string{refusedBody, refusedHead} {
				if strings.HasSuffix(passed, marker) {
					passed = strings.TrimSuffix(passed, marker)
					break
				}
			}
		}
		if !strings.HasPrefix(string(in), passed) {
			t.Fatalf("Go got bytes the client did not send:\nin  %q\nout %q", in, whole)
		}
		counted := &countingReader{r: strings.NewReader(passed)}
		br := bufio.NewReader(counted)
		for {
			at := int64(counted.n - br.Buffered())
			if br.Buffered() == 0 {
				if _, err := br.Peek(1); err != nil {
					return
				}
				at = int64(counted.n - br.Buffered())
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if !heads[at] {
				t.Fatalf("Go read a request head at %d the guard did not check: %q", at, passed[at:])
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
		}
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A hijacked connection's bytes that the guard read and Go did not take
// are the app's: Hijacked gives them back, and the guard passes what
// follows. Under TLS they belong to the TLS connection: it keeps them.
func TestGuardHijacked(t *testing.T) {
	head := "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"
	c := &guardConn{Conn: &scripted{data: []byte(head + "EARLY\x00\x01"), pieces: []int{len(head) + 7, 100}}}
	got := make([]byte, len(head))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != head {
		t.Fatalf("head: %q, %v", got, err)
	}
	if held := string(c.Hijacked()); held != "EARLY\x00\x01" {
		t.Fatalf("held bytes: %q", held)
	}
	c.Conn.(*scripted).data = []byte("GARBAGE \x00 not HTTP")
	rest, _ := io.ReadAll(c)
	if string(rest) != "GARBAGE \x00 not HTTP" {
		t.Fatalf("after the hijack: %q", rest)
	}

	hello := "\x16\x03\x01 a handshake"
	c = &guardConn{Conn: &scripted{data: []byte(hello)}}
	first := make([]byte, 4)
	if _, err := io.ReadFull(c, first); err != nil {
		t.Fatal(err)
	}
	if held := c.Hijacked(); held != nil {
		t.Fatalf("under TLS the guard gave away %q", held)
	}
	rest, _ = io.ReadAll(c)
	if string(first)+string(rest) != hello {
		t.Fatalf("under TLS: %q", string(first)+string(rest))
	}
}

// HTTP/2's preface passes (cleartext HTTP/2 by prior knowledge), unless
// the guard was told the server speaks none: then Go gets a line it
// answers 400, and nothing after it.
func TestGuardH2CPreface(t *testing.T) {
	preface := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04"
	if got := guarded(preface); got != preface {
		t.Fatalf("with h2c: got %q, want the preface as sent", got)
	}
	c := &guardConn{Conn: &scripted{data: []byte(preface)}, framer: framer{noH2C: true}}
	out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
	if string(out) != refusedHead {
		t.Fatalf("without h2c: got %q, want %q", out, refusedHead)
	}
}

// A head over the guard's limit is refused; Go's 400 for the refusal goes
// out as 414 when the request line alone is that long, else as 431.
func TestGuardHeadTooLarge(t *testing.T) {
	limit := headLimit(0)
	for _, tc := range []struct {
		name, head, marker, status string
	}{
		{"a long request line", "GET /" + strings.Repeat("a", limit+10), refusedLongURI, "HTTP/1.1 414 URI Too Long\r\n"},
		{"a long header", "GET / HTTP/1.1\r\nX: " + strings.Repeat("b", limit+10), refusedLongHead, "HTTP/1.1 431 Request Header Fields Too Large\r\n"},
	} {
		conn := &scripted{data: []byte(tc.head)}
		c := &guardConn{Conn: conn}
		out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
		if string(out) != tc.marker {
			t.Fatalf("%s: Go got %q, want %q", tc.name, out, tc.marker)
		}
		if n, err := io.WriteString(c, goBadRequest); err != nil || n != len(goBadRequest) {
			t.Fatalf("%s: writing Go's answer: %d, %v", tc.name, n, err)
		}
		if !strings.HasPrefix(conn.written.String(), tc.status) {
			t.Fatalf("%s: the client got %q, want %q", tc.name, conn.written.String(), tc.status)
		}
		// Anything else Go writes passes as it is.
		io.WriteString(c, goBadRequest)
		if !strings.HasSuffix(conn.written.String(), goBadRequest) {
			t.Fatalf("%s: a second 400 was changed too", tc.name)
		}
	}
}

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

// The guard's limit is the server's: Go reads MaxHeaderBytes of a head
// and 4 KiB of slack (16 KiB and 4 under Caddy's default). A head that
// fits passes whole; one a byte longer is refused as soon as that much has
// come, without waiting for more (its client may never send the end).
func TestGuardHeadLimit(t *testing.T) {
	if got := headLimit(0); got != 16<<10+4096 {
		t.Fatalf("the default limit: %d, want Caddy's 16 KiB and Go's 4 KiB", got)
	}
	for _, max := range []int{0, 1 << 20} {
		limit := headLimit(max)
		prefix := "GET / HTTP/1.1\r\nX: "
		fits := prefix + strings.Repeat("b", limit-len(prefix)-4) + "\r\n\r\n"
		if got := guardedLimit(fits, limit); got != fits {
			t.Fatalf("limit %d: a head of exactly the limit: got %d bytes, want it whole", limit, len(got))
		}
		over := prefix + strings.Repeat("b", limit-len(prefix)+1)
		c := &guardConn{Conn: &endless{data: []byte(over)}, framer: framer{headLimit: limit}}
		p := make([]byte, 4096)
		n, err := c.Read(p)
		if err != nil || string(p[:n]) != refusedLongHead {
			t.Fatalf("limit %d: a head a byte over it, its end never sent: got %q, %v; want the refusal at once", limit, p[:n], err)
		}
		if held := cap(c.in); held > limit+32<<10 {
			t.Errorf("limit %d: the guard held %d bytes for it", limit, held)
		}
	}
}

// guardedLimit is what Go reads of in through a guard with the given limit.
func guardedLimit(in string, limit int) string {
	c := &guardConn{Conn: &scripted{data: []byte(in)}, framer: framer{headLimit: limit}}
	out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
	return string(out)
}

// endless reads its data, then blocks the test if read again: a client
// that never sends the rest.
type endless struct {
	net.Conn
	data []byte
}

func (c *endless) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		panic("read past what the client sent: the guard waited for more")
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}
