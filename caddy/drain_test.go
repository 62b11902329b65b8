package ruvoycaddy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// The drain's counts over real loopback connections, and how long it
// waits for each kind; the e2e tests (test/deploy_test.go) stop the real
// binary with connections in these states.
func TestDrainWaits(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &Drain{logger: zap.NewNop()}
	l := d.WrapListener(inner).(*drainListener)
	accept := func() (client, server net.Conn) { return connect(t, inner, l) }
	counts := func(what string, silent, reading int64) {
		t.Helper()
		if s, r := l.silent.Load(), l.reading.Load(); s != silent || r != reading {
			t.Fatalf("%s: %d silent, %d reading; want %d, %d", what, s, r, silent, reading)
		}
	}

	// Answered (written to) and closed connections are not waited for.
	c1, s1 := accept()
	c1.Write([]byte("GET"))
	s1.Read(make([]byte, 8))
	counts("one connection that sent bytes", 0, 1)
	s1.Write([]byte("HTTP/1.1 200 OK\r\n"))
	counts("after its answer", 0, 0)
	_, s2 := accept()
	counts("a silent connection", 1, 0)
	s2.Close()
	s2.Close()
	counts("after it closed (twice)", 0, 0)

	// A silent connection is waited for silentWait, no longer.
	accept()
	start := time.Now()
	d.Handle(context.Background(), caddy.Event{})
	if waited := time.Since(start); waited < silentWait || waited > silentWait+time.Second {
		t.Fatalf("waited %v for a silent connection; want about %v", waited, silentWait)
	}

	// Once drained, Accept blocks until the server closes the wrapper,
	// then reports it closed.
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	select {
	case err := <-accepted:
		t.Fatalf("Accept returned before Close: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// A connection amid its first head is waited for until the head ends, and
// then for settle; one whose head was read earlier is not waited for,
// however long its answer takes.
func TestDrainWaitsForAHeadToEnd(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &Drain{logger: zap.NewNop()}
	l := d.WrapListener(inner)
	defer l.Close()
	busy, busyServer := connect(t, inner, l)
	busy.Write([]byte("GET /long HTTP/1.1\r\nHost: a\r\n\r\n"))
	busyServer.Read(make([]byte, 64))
	half, halfServer := connect(t, inner, l)
	half.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n"))
	halfServer.Read(make([]byte, 64))
	time.Sleep(settle)

	const restAfter = silentWait + 300*time.Millisecond
	go func() {
		time.Sleep(restAfter)
		half.Write([]byte("\r\n"))
		halfServer.Read(make([]byte, 64))
	}()
	start := time.Now()
	d.Handle(context.Background(), caddy.Event{})
	if waited := time.Since(start); waited < restAfter+settle || waited > restAfter+settle+time.Second {
		t.Fatalf("waited %v for a head that ended after %v; want that and %v more", waited, restAfter, settle)
	}
}

// connect dials inner and accepts the connection through l, its wrapper.
func connect(t *testing.T, inner, l net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestDrainHeadEnds(t *testing.T) {
	cases := []struct {
		pieces []string
		end    int // the piece the head ends in; -1: none
	}{
		{[]string{"GET / HTTP/1.1\r\nHost: a\r\n\r\n"}, 0},
		{[]string{"GET / HTTP/1.1\r\nHost: a\r\n", "\r\n"}, 1},
		{[]string{"GET / HTTP/1.1\r\nHost: a\r", "\n\r", "\n"}, 2},
		{[]string{"GET / HTTP/1.1\nHost: a\n\n"}, 0},
		{[]string{"GET / HTTP/1.1\r\nHost: a\r\n"}, -1},
		{[]string{"GET / HTTP/1.1\r\nX-A: \r\r\n"}, -1},
		{[]string{"\r\nGET / HTTP/1.1\r\n", "Host: a\r\n\r\n"}, 1},
	}
	for _, tc := range cases {
		c := &drainConn{}
		end := -1
		for i, p := range tc.pieces {
			if c.headEnds([]byte(p)) {
				end = i
				break
			}
		}
		if end != tc.end {
			t.Errorf("%q: the head ends in piece %d, want %d", tc.pieces, end, tc.end)
		}
	}
}
