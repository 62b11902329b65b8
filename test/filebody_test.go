package test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// filesServer serves test/apps/files.ru over dir, which holds the given
// files of random bytes, and dir itself with --static (at /NAME).
func filesServer(t *testing.T, sizes map[string]int, args ...string) (*server, string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	want := map[string][]byte{}
	for name, n := range sizes {
		b := make([]byte, n)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = b
	}
	port := freePort(t)
	s := launchIn(t, "", []string{"FILES_ROOT=" + dir}, port, append([]string{"-p", port, "--sendfile-dir", dir, "--static", dir, app("files.ru")}, args...)...)
	s.waitReady(t)
	return s, dir, want
}

// File bodies, from the app (a body with to_path), by X-Sendfile and from
// --static, go out with sendfile(2) over cleartext HTTP/1.1, byte for
// byte, in pieces no larger than Caddy's max_write_chunk; strace counts
// the bytes.
func TestFileBodySendfile(t *testing.T) {
	_, err := exec.LookPath("strace")
	need(t, err == nil, "strace (make setup-test installs it)")
	sizes := map[string]int{"1m.bin": 1<<20 + 3, "16m.bin": 16 << 20}
	s, _, want := filesServer(t, sizes)
	trace := filepath.Join(t.TempDir(), "strace.txt")
	st := exec.Command("strace", "-f", "-qq", "-e", "trace=sendfile", "-o", trace, "-p", strconv.Itoa(s.cmd.Process.Pid))
	var stderr bytes.Buffer
	st.Stderr = &stderr
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	defer st.Process.Kill()
	time.Sleep(time.Second) // strace attaches to every thread

	total := 0
	for _, path := range []string{"/files/1m.bin", "/x/1m.bin", "/files/16m.bin", "/x/16m.bin", "/1m.bin", "/16m.bin", "/linted/1m.bin"} {
		res, err := client.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		name := filepath.Base(path)
		if err != nil || !bytes.Equal(got, want[name]) {
			t.Fatalf("GET %s: %d bytes (%v), want the file's %d", path, len(got), err, len(want[name]))
		}
		if path[1] == 'x' {
			equal(t, "X-Sendfile reaches the client", res.Header.Get("X-Sendfile"), "")
		}
		if !strings.HasPrefix(path, "/linted") {
			total += len(got)
		}
	}
	st.Process.Signal(syscall.SIGINT)
	st.Wait()
	out, err := os.ReadFile(trace)
	if err != nil {
		t.Fatalf("%v (strace: %s)", err, stderr.String())
	}
	calls := regexp.MustCompile(`sendfile\(\d+, \d+, NULL, (\d+)\)\s+= (\d+)`).FindAllStringSubmatch(string(out), -1)
	sent := 0
	for _, c := range calls {
		asked, _ := strconv.Atoi(c[1])
		if asked > 64<<10 {
			t.Errorf("sendfile asked for %d bytes, more than Caddy's 64 KiB piece", asked)
		}
		n, _ := strconv.Atoi(c[2])
		sent += n
	}
	t.Logf("%d sendfile calls sent %d of %d body bytes", len(calls), sent, total)
	// Each body's first 512 bytes (Go's sniffing copy) and its tail under
	// a piece are copied; /linted's body (by each) is not a file's.
	if sent < total-6*(64<<10+512) || sent > total {
		t.Fatalf("sendfile sent %d of %d body bytes:\n%s", sent, total, out)
	}
}

// Ranges, HEAD and HTTP/2 (no sendfile there) give the same bytes.
func TestFileBodyRangesAndH2C(t *testing.T) {
	s, _, want := filesServer(t, map[string]int{"1m.bin": 1<<20 + 3}, "--h2c")
	for _, c := range []*http.Client{client, h2cClient()} {
		for _, prefix := range []string{"/files", "/x", "/linted", ""} {
			req, _ := http.NewRequest("GET", s.url+prefix+"/1m.bin", nil)
			req.Header.Set("Range", "bytes=100-200099")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			res.Body.Close()
			equal(t, prefix+" range status over "+res.Proto, res.StatusCode, 206)
			if err != nil || !bytes.Equal(got, want["1m.bin"][100:200100]) {
				t.Fatalf("%s range over %s: %d bytes (%v), want 200000", prefix, res.Proto, len(got), err)
			}
			res, err = c.Get(s.url + prefix + "/1m.bin")
			if err != nil {
				t.Fatal(err)
			}
			got, err = io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || !bytes.Equal(got, want["1m.bin"]) {
				t.Fatalf("%s over %s: %d bytes (%v)", prefix, res.Proto, len(got), err)
			}
			res, err = c.Head(s.url + prefix + "/1m.bin")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			equal(t, prefix+" HEAD length over "+res.Proto, res.ContentLength, int64(1<<20+3))
		}
	}
}

// A file that grows while it is sent: the client gets the Content-Length
// it was promised, no byte more, and the connection's next answer is
// intact (a byte past the length would be read as the next answer's).
func TestFileBodyGrowingFile(t *testing.T) {
	const size = 32 << 20
	for _, prefix := range []string{"/files", "/x", ""} {
		t.Run("at "+prefix+"/", func(t *testing.T) {
			s, dir, want := filesServer(t, map[string]int{"grow.bin": size, "small.txt": 10})
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET %s/grow.bin HTTP/1.1\r\nHost: x\r\n\r\n", prefix)
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "Content-Length", res.ContentLength, int64(size))
			first := make([]byte, 100_000)
			if _, err := io.ReadFull(res.Body, first); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // the server's sends fill the socket
			f, err := os.OpenFile(filepath.Join(dir, "grow.bin"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(bytes.Repeat([]byte("X"), 4<<20))
			f.Close()
			rest, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := append(first, rest...); !bytes.Equal(got, want["grow.bin"]) {
				t.Fatalf("got %d bytes, want the %d the file had", len(got), size)
			}
			fmt.Fprintf(conn, "GET %s/small.txt HTTP/1.1\r\nHost: x\r\n\r\n", prefix)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := br.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
				t.Fatalf("the next answer on the connection: %.60q, %v", line, err)
			}
		})
	}
}

// Cleartext HTTP/2 is off without --h2c: a connection that opens with
// its preface gets a 400 and is closed (ruvoy lists h2c for Caddy all the
// same, so that connections keep sendfile: HTTP1Guard.NoH2C).
func TestFileBodyH2CPrefaceRefused(t *testing.T) {
	s := start(t, app("core.ru"))
	got := s.raw(t, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Fatalf("the HTTP/2 preface without --h2c: %q, want a 400", got)
	}
	equal(t, "GET / after it", s.get(t, "/raw/hello").body, "hello world")
}
