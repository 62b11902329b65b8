package h1guard

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

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

// readerFrom is a connection with its own ReadFrom (as *net.TCPConn).
type readerFrom struct {
	scripted
	called bool
}

func (c *readerFrom) ReadFrom(r io.Reader) (int64, error) {
	c.called = true
	return io.Copy(&c.written, r)
}

// A guarded connection passes ReadFrom on, over TLS too: Go's server sends
// files with sendfile(2) only through connections that have it all the
// way down.
func TestGuardPassesReadFrom(t *testing.T) {
	for _, inner := range []net.Conn{&readerFrom{}, &tlsScripted{}} {
		c, _ := NewListener(&oneConn{inner}, Config{}).Accept()
		rf, ok := c.(io.ReaderFrom)
		if !ok {
			t.Fatalf("%T: the guarded connection has no ReadFrom", inner)
		}
		if n, err := rf.ReadFrom(strings.NewReader("body")); n != 4 || err != nil {
			t.Fatalf("%T: ReadFrom: %d, %v", inner, n, err)
		}
	}
	inner := &readerFrom{}
	c, _ := NewListener(&oneConn{inner}, Config{}).Accept()
	c.(io.ReaderFrom).ReadFrom(strings.NewReader("body"))
	if !inner.called || inner.written.String() != "body" {
		t.Fatalf("the connection's own ReadFrom was not used: %v, %q", inner.called, inner.written.String())
	}
}
