package test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The connections apps take over (rack.hijack, Rack 3 upgrades), with the
// app test/apps/hijack.ru: an echo of 5-byte messages that ends at "bye!!".

const upgradeHead = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"

// The head each upgrade route answers with, byte for byte: the app
// writes its own after a full hijack; ruvoy writes the app's headers as
// given (lower case) otherwise.
var upgradeRoutes = map[string]string{
	"/full":         upgradeHead,
	"/partial-echo": "HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: Upgrade\r\n\r\n",
	"/upgrade":      "HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: Upgrade\r\n\r\n",
}

// openUpgrade sends an upgrade request for path on c and checks the head
// that comes back.
func openUpgrade(t testing.TB, c net.Conn, path string) *bufio.Reader {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", path)
	r := bufio.NewReader(c)
	want := upgradeRoutes[path]
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("%s: reading the head: %v (got %q)", path, err, got)
	}
	equal(t, path+" head", string(got), want)
	return r
}

// echoRounds sends n messages and checks each comes back, then says bye
// and checks the app closed the connection.
func echoRounds(t testing.TB, c net.Conn, r *bufio.Reader, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("m%04d", i%10000)
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		equal(t, "echo", string(got), msg)
	}
	io.WriteString(c, "bye!!")
	rest, err := io.ReadAll(r)
	if err != nil || len(rest) != 0 {
		t.Fatalf("after bye: %q, %v (want the app to close the connection)", rest, err)
	}
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func startHijack(t *testing.T, workers int, args ...string) (*server, string) {
	adminPort := freePort(t)
	args = append([]string{"--admin-port", adminPort}, args...)
	if workers > 0 {
		args = append(args, "-w", strconv.Itoa(workers))
	}
	return start(t, append(args, app("hijack.ru"))...), "http://127.0.0.1:" + adminPort
}

func inProcessAndWorkers(t *testing.T, f func(t *testing.T, workers int)) {
	t.Run("one process", func(t *testing.T) { f(t, 0) })
	t.Run("workers", func(t *testing.T) { f(t, 1) }) // one: the app's figures are one process's
}

// Full and partial hijack and a Rack 3 upgrade, each echoing byte for
// byte, one at a time and 50 at once; the gauge of hijacked connections
// counts them and comes back to 0.
func TestHijackEcho(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, admin := startHijack(t, workers)
		for path := range upgradeRoutes {
			c := dial(t, s.addr)
			r := openUpgrade(t, c, path)
			eventually(t, 5*time.Second, "the gauge counts the connection", func() bool {
				return metricValue(t, admin, "ruvoy_hijacked_connections") == "1"
			})
			echoRounds(t, c, r, 20)
		}
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(path string) {
				defer wg.Done()
				c, err := net.Dial("tcp", s.addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				t := inGoroutine(t)
				echoRounds(t, c, openUpgrade(t, c, path), 50)
			}([]string{"/full", "/partial-echo", "/upgrade"}[i%3])
		}
		wg.Wait()
		eventually(t, 5*time.Second, "no hijacked connection left", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
		})
		equal(t, "echoes ended", s.appStats(t)["echo.ended"], 53)
		// Hijacking takes no place from requests: 50 held connections and
		// the server still answers (max-requests would be the limit).
		equal(t, "after", s.get(t, "/hijackp").body, "true")
	})
}

// rack.hijack? is true where the connection can be handed over: HTTP/1.x
// without a request body; not on HTTP/2, nor with a body (its end is where
// the next request begins).
func TestHijackWhereAvailable(t *testing.T) {
	s := start(t, "--h2c", app("hijack.ru"))
	equal(t, "HTTP/1.1 GET", s.get(t, "/hijackp").body, "true")
	equal(t, "HTTP/1.1 POST", s.do(t, "POST", "/hijackp", strings.NewReader("x")).body, "false")
	res, err := h2cClient().Get(s.url + "/hijackp")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "HTTP/2", res.Proto+" "+string(b), "HTTP/2.0 false")
	// A 101 over HTTP/2 cannot switch: 500, and why in the log.
	res, err = h2cClient().Get(s.url + "/upgrade-always")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	equal(t, "HTTP/2 101", res.StatusCode, 500)
	s.waitStderr(t, "a 101 answer needs an HTTP/1.1 connection", 1)
}

// A partial hijack writes the app's head as given, then the app's bytes;
// the connection ends when the app closes it.
func TestHijackPartial(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, _ := startHijack(t, workers)
		c := dial(t, s.addr)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "GET /partial HTTP/1.1\r\nHost: x\r\n\r\n")
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "answer", string(b), "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\npartial body\n")
	})
}

// Hijacking once the response has begun is refused with IOError; an app
// that raises after it hijacked is logged; an upgrade the app refuses is
// an ordinary answer on a connection that goes on.
func TestHijackRefusals(t *testing.T) {
	s := start(t, app("hijack.ru"))
	mustContain(t, "late", s.get(t, "/late").body, "begun\nrefused: ruvoy: the response has begun")

	c := dial(t, s.addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /full-raise HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	equal(t, "after a hijack the app's answer is not sent", string(b), "")
	s.waitStderr(t, `"msg":"the app raised after it hijacked the connection","error_class":"RuntimeError","error":"after the hijack"`, 1)

	c = dial(t, s.addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: x\r\n\r\nGET /hijackp HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(c)
	for _, want := range []string{"not an upgrade\n", "true"} {
		res, err := readResponse(r)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "body", res, want)
	}
}

func readResponse(r *bufio.Reader) (string, error) {
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// Over TLS Go keeps the TLS state and pumps the plaintext: the same echo.
func TestHijackTLS(t *testing.T) {
	c := makeCerts(t)
	s := start(t, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, app("hijack.ru"))
	for path := range upgradeRoutes {
		conn, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: c.pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		echoRounds(t, conn, openUpgrade(t, conn, path), 20)
		conn.Close()
	}
}

// Clients that vanish (a reset) mid-message: the app reads the end, its
// connection is closed, nothing is left open, and the server goes on.
func TestHijackVanishingClients(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, admin := startHijack(t, workers)
		// The admin port's gate keeps its connection to Caddy's admin
		// socket (both ends are this process's): counted from the start.
		metricValue(t, admin, "ruvoy_hijacked_connections")
		fds := openFDs(t, s)
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", s.addr)
				if err != nil {
					t.Error(err)
					return
				}
				openUpgrade(inGoroutine(t), c, "/full")
				io.WriteString(c, "ab")
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
		wg.Wait()
		eventually(t, 10*time.Second, "no hijacked connection left", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
		})
		eventually(t, 10*time.Second, "every echo ended", func() bool {
			st := s.appStats(t)
			return st["echo.ended"]+st["echo.Errno::ECONNRESET"]+st["echo.EOFError"] == 100
		})
		if workers == 0 {
			eventually(t, 10*time.Second, "no descriptor left open", func() bool { return openFDs(t, s) <= fds+2 })
		}
		equal(t, "still serving", s.get(t, "/hijackp").body, "true")
	})
}

// openFDs counts the server process's open descriptors.
func openFDs(t testing.TB, s *server) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A client that never reads: the app's writes wait, and what is in flight
// stays within the sockets' buffers; once the client goes, the app's
// write fails and its connection closes.
func TestHijackSlowReader(t *testing.T) {
	s, admin := startHijack(t, 0)
	c := dial(t, s.addr)
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /full-flood HTTP/1.1\r\nHost: x\r\n\r\n")
	var last int
	eventually(t, 10*time.Second, "the app's writes stop", func() bool {
		n := s.appStats(t)["flood.bytes"]
		time.Sleep(500 * time.Millisecond)
		stalled := n > 0 && n == s.appStats(t)["flood.bytes"]
		last = n
		return stalled
	})
	t.Logf("the app got %d KiB out before it waited", last>>10)
	if last > 32<<20 {
		t.Fatalf("%d bytes in flight to a client that reads nothing", last)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	eventually(t, 10*time.Second, "the app's write fails", func() bool { return s.appStats(t)["flood.ended"] == 1 })
	eventually(t, 10*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
}

// A stop closes hijacked connections (they are not requests: the stop
// does not wait for them), logs it, and exits 0.
func TestHijackShutdown(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, admin := startHijack(t, workers)
		var conns []net.Conn
		for i := 0; i < 3; i++ {
			c := dial(t, s.addr)
			r := openUpgrade(t, c, "/full")
			io.WriteString(c, "hello")
			got := make([]byte, 5)
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		eventually(t, 10*time.Second, "the gauge counts them", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "3"
		})
		began := time.Now()
		s.cmd.Process.Signal(syscall.SIGTERM)
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if n, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("read %d bytes after the stop", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection stayed open after the stop")
			}
		}
		equal(t, "exit status", s.wait(t, 30*time.Second), 0)
		t.Logf("stopped in %v", time.Since(began))
		mustContain(t, "log", s.stderr.String(), "closing hijacked connections")
	})
}

// 10,000 idle hijacked connections at once (fewer where the descriptor
// limit is lower: each side holds one per connection; Go raises its soft
// limit to the hard one), then each one echoes: none is lost, and all of
// them close.
func TestHijackManyIdle(t *testing.T) {
	n := 10000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(n)+2000 {
		n = int(lim.Cur) - 2000
		t.Logf("descriptor limit %d: %d connections", lim.Cur, n)
	}
	s, admin := startHijack(t, 0)
	before := s.rss(t)
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	each := func(f func(t testing.TB, i int)) {
		var wg sync.WaitGroup
		for w := 0; w < 20; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				t := inGoroutine(t)
				for i := w; i < n; i += 20 {
					f(t, i)
				}
			}(w)
		}
		wg.Wait()
	}
	each(func(t testing.TB, i int) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Error(err)
			return
		}
		conns[i] = c
		readers[i] = openUpgrade(t, c, []string{"/full", "/upgrade"}[i%2])
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	eventually(t, 30*time.Second, "all counted", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == strconv.Itoa(n)
	})
	t.Logf("server RSS: %d MiB before, %d MiB with %d idle hijacked connections", before>>20, s.rss(t)>>20, n)
	each(func(t testing.TB, i int) {
		conns[i].SetDeadline(time.Now().Add(60 * time.Second))
		echoRounds(t, conns[i], readers[i], 1)
	})
	eventually(t, 30*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
	equal(t, "still serving", s.get(t, "/hijackp").body, "true")
}

// Bytes a client sends right behind its upgrade request, before the
// answer, reach the app first (Go or the HTTP/1 guard had read them).
func TestHijackEarlyBytes(t *testing.T) {
	s := start(t, app("hijack.ru"))
	for path, head := range upgradeRoutes {
		c := dial(t, s.addr)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nearlylater", path)
		r := bufio.NewReader(c)
		got := make([]byte, len(head)+10)
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("%s: %v (got %q)", path, err, got)
		}
		equal(t, path, string(got), head+"earlylater")
		echoRounds(t, c, r, 1)
	}
}

// Full and partial hijack answer as Puma's do, byte for byte. (Puma 5.6
// has no Rack 3 upgrades: after a 101 with a callable body, or with a
// rack.hijack header, it reads the client's next bytes as HTTP.)
func TestHijackMatchesPuma(t *testing.T) {
	s := start(t, "-e", pumaEnv, app("hijack.ru"))
	abs, _ := filepath.Abs("apps")
	reference := strings.TrimPrefix(puma(t, abs, "hijack.ru", nil), "http://")
	for _, tc := range []struct{ request, send string }{
		{"GET /partial HTTP/1.1\r\nHost: x\r\n\r\n", ""},
		{"GET /full HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", "hellobye!!"},
	} {
		var answers [2]string
		for i, addr := range []string{s.addr, reference} {
			c := dial(t, addr)
			c.SetDeadline(time.Now().Add(30 * time.Second))
			io.WriteString(c, tc.request)
			r := bufio.NewReader(c)
			if tc.send != "" {
				head := make([]byte, len(upgradeHead))
				if _, err := io.ReadFull(r, head); err != nil {
					t.Fatal(err)
				}
				answers[i] = string(head)
				io.WriteString(c, tc.send)
			}
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			answers[i] += string(rest)
		}
		equal(t, strings.SplitN(tc.request, "\r\n", 2)[0]+": ruvoy against Puma", answers[0], answers[1])
	}
}

// Out of descriptors (EMFILE): a connection that cannot be handed over
// gets 503 before anything else went out, the app hears why, and the
// server goes on once descriptors are free again.
func TestHijackOutOfDescriptors(t *testing.T) {
	for _, path := range []string{"/full", "/upgrade"} {
		s := start(t, app("hijack.ru"))
		limit := uint64(openFDs(t, s) + 20)
		if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
			t.Fatalf("lowering the server's descriptor limit: %v", err)
		}
		var held []net.Conn
		refused := ""
		for i := 0; i < 40 && refused == ""; i++ {
			c := dial(t, s.addr)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", path)
			got := make([]byte, len(upgradeRoutes[path]))
			n, err := io.ReadFull(c, got)
			switch {
			case string(got) == upgradeRoutes[path]:
				held = append(held, c)
			case err != nil && n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
				t.Fatalf("%s: connection %d was not accepted (the listener is out of descriptors first)", path, i)
			default:
				rest, _ := io.ReadAll(c)
				refused = string(got[:n]) + string(rest)
			}
		}
		equal(t, path+": the answer once out of descriptors", refused,
			"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 20\r\nConnection: close\r\n\r\nService Unavailable\n")
		s.waitStderr(t, "could not be handed over: too many open files", 1)
		for _, c := range held {
			c.Close()
		}
		// The limit stays: the closed connections make room once the app
		// has read their ends and closed its own, which it does in its own
		// time (on a busy machine, after the next client came: that one
		// was refused too, in CI on Ruby 3.3).
		eventually(t, 10*time.Second, "the app closes its ends of the connections the clients closed", func() bool {
			return openFDs(t, s) < int(limit)-len(held)/2
		})
		c := dial(t, s.addr)
		echoRounds(t, c, openUpgrade(t, c, path), 3)
	}
}
