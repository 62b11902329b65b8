package test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// How a raw exchange ended.
const (
	endEOF     = "eof"     // the server closed the connection
	endReset   = "reset"   // the server reset it
	endTimeout = "timeout" // the server kept it open and said no more
)

// exchange sends request over a new connection (then half-closes it when
// asked) and reads until the server closes it or goes quiet for wait.
func exchange(t testing.TB, addr, request string, halfClose bool, wait time.Duration) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return string(out), endEOF
		case errors.Is(err, syscall.ECONNRESET):
			return string(out), endReset
		case errors.Is(err, os.ErrDeadlineExceeded):
			return string(out), endTimeout
		default:
			t.Fatalf("reading: %v", err)
		}
	}
}

// seen is the list of requests edges.ru was called for.
func (s *server) seen(t testing.TB) []string {
	t.Helper()
	return s.getList(t, "/seen")
}

func (s *server) wasCalled(t testing.TB, request string) bool {
	t.Helper()
	for _, r := range s.seen(t) {
		if r == request {
			return true
		}
	}
	return false
}

// A chunked body that is not framed right gets 400 and a closed
// connection, whether or not the app reads its body, and the bytes after
// it never reach the app as a request (before, Go filled in an empty 200,
// kept the connection, and parsed what followed as the next request).
// Both lines of defence are tested: the guard (ruvoy config.ru), and the
// handler alone (a Caddyfile without the guard).
func TestEdgesMalformedChunkedBody(t *testing.T) {
	bodies := map[string]string{
		"size Z":              "Z\r\nhello\r\n0\r\n\r\n",
		"size -5":             "-5\r\nhello\r\n0\r\n\r\n",
		"size 0x5":            "0x5\r\nhello\r\n0\r\n\r\n",
		"17 hex digits":       "00000000000000005\r\nhello\r\n0\r\n\r\n",
		"no CRLF after data":  "5\r\nhello0\r\n\r\n",
		"bytes after data":    "3\r\nabcXX0\r\n\r\n",
		"bare LF size line":   "5\nhello\r\n0\r\n\r\n",
		"trailer no colon":    "5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
		"trailer folded":      "5\r\nhello\r\n0\r\nX-A: 1\r\n folded\r\n\r\n",
		"second chunk broken": "5\r\nhello\r\n5\r\nworld!\r\n0\r\n\r\n",
	}
	// Go's parser takes a folded trailer line; only the guard refuses it.
	guardOnly := map[string]bool{"trailer folded": true}
	guarded := start(t, app("edges.ru"))
	unguarded := startCaddyfileApp(t, "edges.ru", "")
	// Cluster mode: one worker, so that /seen sees every request.
	clustered := start(t, "-w", "1", app("edges.ru"))
	for _, s := range []*server{guarded, unguarded, clustered} {
		for name, body := range bodies {
			if s == unguarded && guardOnly[name] {
				continue
			}
			for _, path := range []string{"/echo", "/hello"} {
				canary := fmt.Sprintf("/canary-%d", time.Now().UnixNano())
				req := "POST " + path + " HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
					"GET " + canary + " HTTP/1.1\r\nHost: a\r\n\r\n"
				out, end := exchange(t, s.addr, req, false, 5*time.Second)
				if !strings.HasPrefix(out, "HTTP/1.1 400 Bad Request\r\n") || strings.Count(out, "HTTP/1.1") != 1 || end != endEOF {
					t.Errorf("%s, %s: want one 400 and a close, got (%s):\n%s", name, path, end, out)
				}
				if s.wasCalled(t, "GET "+canary) {
					t.Errorf("%s, %s: the bytes after the malformed body reached the app as a request", name, path)
				}
			}
		}
		equal(t, "still serving", s.get(t, "/x").body, "hello /x")
	}
}

// A body that ends (FIN) before its Content-Length or its last chunk: 400.
func TestEdgesTruncatedBody(t *testing.T) {
	for _, s := range []*server{start(t, app("edges.ru")), start(t, "-w", "2", app("edges.ru"))} {
		truncatedBody(t, s)
	}
}

func truncatedBody(t *testing.T, s *server) {
	for _, req := range []string{
		"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello",
		"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
		"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
	} {
		out, end := exchange(t, s.addr, req, true, 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 400 Bad Request\r\n") || end != endEOF {
			t.Errorf("%q: want 400 and a close, got (%s):\n%s", req, end, out)
		}
	}
}

// A whole chunked body keeps the connection for the next request.
func TestEdgesChunkedKeepsConnection(t *testing.T) {
	s := start(t, app("edges.ru"))
	req := "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n1\r\n!\r\n0\r\nX-T: v\r\n\r\n" +
		"GET /after HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	out, end := exchange(t, s.addr, req, false, 5*time.Second)
	answers := parseAnswers(out)
	if len(answers) != 2 || answers[0].body != "hello!" || answers[1].body != "hello /after" || end != endEOF {
		t.Fatalf("want the echo, then the next answer; got (%s):\n%s", end, out)
	}
}

// A client that half-closes after a whole request still gets the answer
// (before, 25 to 30 of 30 got an empty 200). One whose answer takes longer
// than 200 ms first gets an interim 100 Continue: the probe that tells a
// half-close from a client that left (vanish.go).
func TestEdgesHalfCloseKeepsTheAnswer(t *testing.T) {
	t.Run("one process", func(t *testing.T) { halfCloseKeepsTheAnswer(t, start(t, app("edges.ru"))) })
	t.Run("workers", func(t *testing.T) { halfCloseKeepsTheAnswer(t, start(t, "-w", "2", app("edges.ru"))) })
}

func halfCloseKeepsTheAnswer(t *testing.T, s *server) {
	cases := []struct{ req, want string }{
		{"GET /half HTTP/1.1\r\nHost: a\r\n\r\n", "hello /half"},
		{"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n", "slow"},
		{"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "hello"},
		{"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello"},
	}
	var wg sync.WaitGroup
	var lost atomic.Int64
	for i := 0; i < 30; i++ {
		for _, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, _ := exchange(inGoroutine(t), s.addr, c.req, true, 5*time.Second)
				if a := parseAnswers(out); len(a) != 1 || a[0].status != 200 || a[0].body != c.want {
					lost.Add(1)
					t.Logf("%q: got %q", c.req, out)
				}
			}()
		}
	}
	wg.Wait()
	equal(t, "answers lost to a half-close", lost.Load(), 0)
}

// HEAD answers carry the GET's length when the app tells it, and no length
// when its body is empty (Rack::Head), never Content-Length: 0.
func TestEdgesHeadLength(t *testing.T) {
	t.Run("one process", func(t *testing.T) { headLength(t, start(t, app("edges.ru"))) })
	t.Run("workers", func(t *testing.T) { headLength(t, start(t, "-w", "2", app("edges.ru"))) })
}

func headLength(t *testing.T, s *server) {
	equal(t, "GET body", len(s.get(t, "/page").body), 733)
	out, _ := exchange(t, s.addr, "HEAD /page HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false, 5*time.Second)
	if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || strings.Contains(out, "Content-Length") || !strings.HasSuffix(out, "\r\n\r\n") {
		t.Fatalf("HEAD: want 200 with no Content-Length and no body, got:\n%s", out)
	}
	equal(t, "HEAD's type", headerOf(out, "Content-Type"), "text/html")
}

// No Content-Type is made up (Go sniffs one when a handler sends none),
// and no Server header unless the app sends one.
func TestEdgesNoInventedHeaders(t *testing.T) {
	s := start(t, app("edges.ru"))
	out, _ := exchange(t, s.addr, "GET /untyped HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false, 5*time.Second)
	if headerOf(out, "Content-Type") != "" || headerOf(out, "Server") != "" {
		t.Fatalf("want neither Content-Type nor Server, got:\n%q", out)
	}
	r := s.get(t, "/server")
	if got := r.header.Values("Server"); len(got) != 1 || got[0] != "EdgesApp/1.0" {
		t.Fatalf("the app's Server header: got %q", got)
	}
	r = s.get(t, "/x")
	if _, ok := r.header["Server"]; ok {
		t.Fatalf("a Server header the app did not send: %q", r.header["Server"])
	}
}

// A body that fails before its first byte: always a 500, never a
// connection closed with nothing sent. Once the head is out (a body that
// waits first), the response is cut visibly: HTTP/1.1 without its last
// chunk, HTTP/1.0 with a reset.
func TestEdgesBodyFailsBeforeFirstByte(t *testing.T) {
	s := start(t, app("edges.ru"))
	for i := 0; i < 50; i++ {
		out, _ := exchange(t, s.addr, "GET /fail HTTP/1.1\r\nHost: a\r\n\r\n", false, 2*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 500 Internal Server Error\r\n") || !strings.HasSuffix(out, "\r\n\r\nInternal Server Error\n") {
			t.Fatalf("try %d: want a 500, got:\n%q", i, out)
		}
	}
	for i := 0; i < 10; i++ {
		out, end := exchange(t, s.addr, "GET /fail?wait=0.05 HTTP/1.1\r\nHost: a\r\n\r\n", false, 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.Contains(out, "Transfer-Encoding: chunked") ||
			strings.HasSuffix(out, "0\r\n\r\n") || end != endEOF {
			t.Fatalf("try %d: want a 200 cut before its last chunk, got (%s):\n%q", i, end, out)
		}
		out, end = exchange(t, s.addr, "GET /fail?wait=0.05 HTTP/1.0\r\nHost: a\r\n\r\n", false, 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.0 200 OK\r\n") || end != endReset {
			t.Fatalf("try %d, HTTP/1.0: want a 200 ended by a reset, got (%s):\n%q", i, end, out)
		}
	}
	equal(t, "still serving", s.get(t, "/x").body, "hello /x")
}

// OPTIONS * reaches the app (rack-conform asks for it).
func TestEdgesOptionsAsterisk(t *testing.T) {
	s := start(t, app("edges.ru"))
	out, _ := exchange(t, s.addr, "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false, 5*time.Second)
	if a := parseAnswers(out); len(a) != 1 || a[0].body != "asterisk: OPTIONS *" {
		t.Fatalf("want the app's answer, got:\n%s", out)
	}
}

// Behind a trusted proxy the client is the rightmost address in
// X-Forwarded-For that is not a trusted proxy; the leftmost is whatever
// the client wrote.
func TestEdgesTrustedProxiesStrict(t *testing.T) {
	s := start(t, "--trusted-proxies", "127.0.0.1/32,10.0.0.0/8", app("edges.ru"))
	for xff, want := range map[string]string{
		"1.1.1.1, 2.2.2.2":           "2.2.2.2",
		"1.1.1.1, 2.2.2.2, 10.0.0.5": "2.2.2.2",
		"3.3.3.3":                    "3.3.3.3",
	} {
		equal(t, "REMOTE_ADDR for "+xff, s.do(t, "GET", "/remote", nil, "X-Forwarded-For", xff).body, want)
	}
}

// X-Sendfile opens the file once, under its directory's os.Root: a FIFO is
// refused at once (it used to hang the request and leak its admission
// place), and a symlink out of the directory is refused, even one swapped
// in while requests run.
func TestEdgesSendfileOpensSafely(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "files")
	os.Mkdir(allowed, 0o755)
	os.WriteFile(filepath.Join(allowed, "plain.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(allowed, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(allowed, "out.txt"))
	adminPort := freePort(t)
	s := start(t, "--sendfile-dir", allowed, "--admin-port", adminPort, app("edges.ru"))
	file := func(name string) response {
		return s.get(t, "/sendfile?path="+filepath.Join(allowed, name))
	}
	equal(t, "a plain file", file("plain.txt").body, "inside")
	for i := 0; i < 20; i++ {
		equal(t, "a FIFO", file("fifo").status, 500)
	}
	equal(t, "a symlink out", file("out.txt").status, 500)
	equal(t, "a path outside", s.get(t, "/sendfile?path="+filepath.Join(dir, "secret.txt")).status, 500)
	equal(t, "places held after the FIFOs", metricValue(t, "http://127.0.0.1:"+adminPort, "ruvoy_requests_in_flight"), "0")

	// A symlink swapped between a file inside and one outside, while
	// requests name it: never the outside file.
	link := filepath.Join(allowed, "swap.txt")
	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := link + ".tmp"
			target := filepath.Join(allowed, "plain.txt")
			if i%2 == 1 {
				target = filepath.Join(dir, "secret.txt")
			}
			os.Remove(tmp)
			os.Symlink(target, tmp)
			os.Rename(tmp, link)
		}
	}()
	for i := 0; i < 2000; i++ {
		if r := file("swap.txt"); r.body == "outside" {
			t.Fatalf("try %d: a file outside the directory was sent", i)
		}
	}
	close(stop)
	swapper.Wait()
}

// --static serves neither dotfiles nor what a symlink out of the directory
// reaches: those requests go to the app. No Server header either.
func TestEdgesStaticRefusesDotfilesAndLinksOut(t *testing.T) {
	dir := t.TempDir()
	public := filepath.Join(dir, "public")
	os.MkdirAll(filepath.Join(public, ".git"), 0o755)
	os.WriteFile(filepath.Join(public, "app.css"), []byte("css"), 0o644)
	os.WriteFile(filepath.Join(public, ".env"), []byte("SECRET=1"), 0o644)
	os.WriteFile(filepath.Join(public, ".git", "config"), []byte("[core]"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o644)
	os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(public, "out.txt"))
	os.Symlink("app.css", filepath.Join(public, "in.css"))
	s := start(t, "--static", public, app("edges.ru"))
	r := s.get(t, "/app.css")
	equal(t, "a file", r.body, "css")
	if _, ok := r.header["Server"]; ok {
		t.Fatalf("a static file came with a Server header: %q", r.header["Server"])
	}
	equal(t, "a link inside", s.get(t, "/in.css").body, "css")
	for _, path := range []string{"/.env", "/.git/config", "/out.txt", "/sub/../.env"} {
		equal(t, path, s.get(t, path).body, "hello "+path)
	}
}

// A second ruvoy on a port in use is refused, unless --reuse-port asks for
// an overlapping restart: then both serve the port's new connections, and
// once the first stops, the second serves them all.
func TestEdgesPortInUse(t *testing.T) {
	s := start(t, app("cluster.ru"))
	port := s.addr[strings.LastIndexByte(s.addr, ':')+1:]
	second := launch(t, port, "-p", port, app("cluster.ru"))
	if code := second.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	mustContain(t, "the refusal", second.stderr.String(), "is already in use")
	shared := launch(t, port, "-p", port, "--reuse-port", app("cluster.ru"))
	shared.waitStdout(t, "the second process", "serving")
	// cluster.ru without -w answers /pid with the server's own pid.
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	pid := func() string {
		t.Helper()
		return statusAndBodyWith(fresh, s.url+"/pid")
	}
	first, other := fmt.Sprint("200 ", s.cmd.Process.Pid), fmt.Sprint("200 ", shared.cmd.Process.Pid)
	seen := map[string]int{}
	for i := 0; i < 200 && (seen[first] == 0 || seen[other] == 0); i++ {
		seen[pid()]++
	}
	if len(seen) != 2 || seen[first] == 0 || seen[other] == 0 {
		t.Fatalf("new connections to the shared port were answered %v; want both %q and %q", seen, first, other)
	}
	equal(t, "the first's exit", s.stop(), 0)
	for i := 0; i < 20; i++ {
		equal(t, "a new connection once the first stopped", pid(), other)
	}
}

// parseAnswers reads the final responses in raw, skipping interim (1xx)
// ones; it stops at the first that is not HTTP.
func parseAnswers(raw string) []response {
	var out []response
	br := bufio.NewReader(strings.NewReader(raw))
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return out
		}
		if res.StatusCode >= 200 {
			out = append(out, response{res.StatusCode, res.Header, string(b)})
		}
	}
}

// headerOf reads a header from a raw response.
func headerOf(raw, name string) string {
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		return ""
	}
	return res.Header.Get(name)
}

// The README's Caddyfile, as written there, keeps the safeguards of
// `ruvoy config.ru`: smuggling shapes get 400, and a stop ends within the
// grace period even with a request still running.
func TestEdgesReadmeCaddyfileKeepsSafeguards(t *testing.T) {
	var caddyfile string
	for _, b := range docBlocks(t) {
		if b.file == "../README.md" && b.lang == "caddyfile" {
			caddyfile = b.text
		}
	}
	if caddyfile == "" {
		t.Fatal("README.md shows no Caddyfile")
	}
	rackup, _ := filepath.Abs(app("edges.ru"))
	caddyfile = strings.Replace(caddyfile, "{\n", "{\n\tadmin off\n\tauto_https off\n\tpersist_config off\n", 1)
	caddyfile = strings.Replace(caddyfile, "/srv/app/config.ru", rackup, 1)
	serve := func(site string, d h1door) *server {
		port := freePort(t)
		text := strings.Replace(caddyfile, "example.com {", strings.ReplaceAll(site, "PORT", port), 1)
		path := filepath.Join(t.TempDir(), "Caddyfile")
		os.WriteFile(path, []byte(text), 0o644)
		s := launch(t, port, "run", "--config", path, "--adapter", "caddyfile")
		s.waitReady(t)
		for name, req := range map[string]string{
			"TE and CL": "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
			"obs-fold":  "GET /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n folded\r\n\r\n",
		} {
			res, _, closed := d.exchange(t, s.addr, req)
			if res.StatusCode != 400 || !closed {
				t.Errorf("%s, %s: want 400 and a closed connection, got %d (closed: %v)", d.name, name, res.StatusCode, closed)
			}
		}
		for _, warning := range []string{"listener wrapper", "placed before tls"} {
			if strings.Contains(s.stderr.String(), warning) {
				t.Errorf("%s: a warning about the listener wrappers:\n%s", d.name, s.stderr)
			}
		}
		return s
	}
	// Over HTTPS, the guard (after tls) reads the decrypted requests.
	certs := makeCerts(t)
	serve("https://127.0.0.1:PORT {\n\ttls "+certs.serverCert+" "+certs.serverKey, h1door{name: "tls", tls: true, alpn: []string{"http/1.1"}})
	s := serve("http://127.0.0.1:PORT {", h1door{name: "cleartext"})
	// A request that runs past the grace period does not hold the stop.
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow-forever HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(t, 30*time.Second)
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("the stop took %v, grace_period is 10s", took)
	}
}

// Without the listener wrappers, the handler says what is missing.
func TestEdgesCaddyfileWithoutWrappersWarns(t *testing.T) {
	s := startCaddyfileApp(t, "edges.ru", "")
	eventually(t, 5*time.Second, "the warnings", func() bool {
		return strings.Contains(s.stderr.String(), "no ruvoy_http1_guard listener wrapper") &&
			strings.Contains(s.stderr.String(), "no ruvoy_drain listener wrapper")
	})
}

// The hostile cases against Caddy alone as the reference: the same binary
// serving a `respond` site. They agree on what matters: the bytes after a
// malformed body never become a request (one answer, then a close), a
// half-closed client gets its answer, HEAD gets a head and no body, and a
// client that vanishes mid-body leaves the server serving. Where the status
// differs the app is why: ruvoy hands the body to it, and a malformed one
// is a 400, where `respond`, which never reads the body, says its 200.
// (Caddy's reverse_proxy, which does read it, answered 502 here and then
// parsed what followed as the next request: the guard stops that too.)
func TestEdgesAgainstCaddyAlone(t *testing.T) {
	ruvoy := start(t, app("edges.ru"))
	port := freePort(t)
	caddy, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}
http://:%s {
	bind 127.0.0.1
	respond "hello" 200
}
`, port))
	for _, c := range []struct {
		s                 *server
		name              string
		malformed, answer string
	}{{ruvoy, "ruvoy", "400", "hello /x"}, {caddy, "Caddy alone", "200", "hello"}} {
		canary := fmt.Sprintf("/canary-%d", time.Now().UnixNano())
		out, end := exchange(t, c.s.addr, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\n"+
			"GET "+canary+" HTTP/1.1\r\nHost: a\r\n\r\n", false, 5*time.Second)
		if a := parseAnswers(out); len(a) != 1 || fmt.Sprint(a[0].status) != c.malformed || end != endEOF {
			t.Errorf("%s, a malformed body and a request after it: want one %s and a close, got (%s):\n%s", c.name, c.malformed, end, out)
		}
		if c.s == ruvoy && ruvoy.wasCalled(t, "GET "+canary) {
			t.Error("ruvoy: the bytes after the malformed body reached the app as a request")
		}

		out, _ = exchange(t, c.s.addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", true, 5*time.Second)
		if a := parseAnswers(out); len(a) != 1 || a[0].status != 200 || a[0].body != c.answer {
			t.Errorf("%s, a half-close after the request: got %q", c.name, out)
		}

		out, end = exchange(t, c.s.addr, "HEAD /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false, 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(out, "\r\n\r\n") || end != endEOF {
			t.Errorf("%s, HEAD: want a 200 head and no body, got (%s):\n%s", c.name, end, out)
		}

		conn, err := net.Dial("tcp", c.s.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 5000))
		conn.Close()
		if r := c.s.get(t, "/x"); r.status != 200 || r.body != c.answer {
			t.Errorf("%s, after a client vanished mid-body: got %d %q", c.name, r.status, r.body)
		}
	}
}
