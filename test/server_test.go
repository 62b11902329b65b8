// Package test holds the end-to-end tests: each starts the real ruvoy
// binary (RUVOY_BIN, default ../ruvoy) on a free port with a real config.ru
// and talks to it over real sockets.
package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/testserver"
)

func binary(t testing.TB) string {
	bin := os.Getenv("RUVOY_BIN")
	if bin == "" {
		bin = "../ruvoy"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no ruvoy binary at %s: run make first (or set RUVOY_BIN)", abs)
	}
	return abs
}

// output collects a process's stdout or stderr.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string // host:port
	url    string
	stdout *output
	stderr *output
	done   chan struct{}
	err    error // from Wait
}

// handedOut are the ports freePort has returned in this run.
var handedOut sync.Map

// freePort is a port nothing listens on, and one freePort has not
// returned before in this run: the kernel may pick a port again as soon as
// it is closed, and two servers given one port share it without a word
// (Caddy's listeners set SO_REUSEPORT). A test that took a port for its
// admin API and then one for its app got the same twice; some of its
// WebSocket dials then reached the admin API, which answered 400.
func freePort(t testing.TB) string {
	for {
		port, err := testserver.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
}

// listeners are the inodes of the TCP sockets listening on port.
func listeners(port string) []string {
	n, _ := strconv.Atoi(port)
	suffix := fmt.Sprintf(":%04X", n)
	var inodes []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(b), "\n") {
			// sl local_address rem_address st ... inode: 0A is LISTEN
			if f := strings.Fields(line); len(f) > 9 && strings.HasSuffix(f[1], suffix) && f[3] == "0A" {
				inodes = append(inodes, f[9])
			}
		}
	}
	return inodes
}

// start runs `ruvoy -p PORT args...` and waits until it accepts
// connections. It is stopped (SIGTERM) when the test ends.
func start(t testing.TB, args ...string) *server {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with env added to the environment.
func startEnv(t testing.TB, env []string, args ...string) *server {
	t.Helper()
	port := freePort(t)
	s := launchIn(t, "", env, port, append([]string{"-p", port}, args...)...)
	s.waitReady(t)
	// ruvoy prints its banner once it listens: a connection before that
	// reached someone else on the port (Caddy binds with SO_REUSEPORT).
	eventually(t, 60*time.Second, "the banner", func() bool { return strings.Contains(s.stdout.String(), ": serving ") })
	// Another process on the port (another test run's server, say) would
	// answer some of the connections: say so, rather than fail oddly. The
	// server's own may be several (localhost: 127.0.0.1 and ::1).
	own := socketInodes(s.cmd.Process.Pid)
	for _, l := range listeners(port) {
		if !own[l] {
			t.Fatalf("a socket that is not this server's listens on port %s (inode %s): another process shares it (SO_REUSEPORT)", port, l)
		}
	}
	return s
}

// socketInodes are the inodes of the sockets process pid holds.
func socketInodes(pid int) map[string]bool {
	own := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			own[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return own
}

// launch starts the binary with exactly args; addr is where it will listen.
func launch(t testing.TB, port string, args ...string) *server {
	t.Helper()
	return launchIn(t, "", nil, port, args...)
}

// launchIn is launch in directory dir, with env added to the environment.
func launchIn(t testing.TB, dir string, env []string, port string, args ...string) *server {
	t.Helper()
	return launchCmd(t, exec.Command(binary(t), args...), dir, env, "127.0.0.1:"+port)
}

// launchCmd starts cmd (the binary, maybe wrapped) in directory dir with
// env added, listening on addr, and stops it (SIGTERM) when the test ends.
// It does not wait: see waitReady.
func launchCmd(t testing.TB, cmd *exec.Cmd, dir string, env []string, addr string) *server {
	t.Helper()
	s := &server{t: t, addr: addr, url: "http://" + addr, cmd: cmd, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	s.cmd.Stdout = s.stdout
	s.cmd.Stderr = s.stderr
	// The admin port's token is known (adminToken), unless env says otherwise.
	s.cmd.Env = append(append(os.Environ(), "RACK_ENV=test", "RUVOY_ADMIN_TOKEN="+adminToken), env...)
	s.cmd.Dir = dir
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		// The race-detector build reports races on stderr and goes on.
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "[BUG]", "fatal error:"} {
			if strings.Contains(s.stderr.String(), bad) {
				t.Errorf("ruvoy (%s) has %q on its stderr", addr, bad)
			}
		}
		if t.Failed() {
			t.Logf("ruvoy on %s stdout:\n%s\nstderr:\n%s", addr, s.stdout, s.stderr)
		}
	})
	return s
}

// startCaddyfile serves core.ru under `ruvoy run` with a Caddyfile whose
// global options hold servers, a `servers { ... }` block.
func startCaddyfile(t *testing.T, servers string) *server {
	t.Helper()
	return startCaddyfileApp(t, "core.ru", servers)
}

// startCaddyfileApp serves an app under `ruvoy run` with a Caddyfile whose
// global options hold servers (none: no listener wrappers at all).
func startCaddyfileApp(t *testing.T, rackup, servers string) *server {
	t.Helper()
	port := freePort(t)
	path, _ := filepath.Abs(app(rackup))
	s, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	%s
}
http://:%s {
	bind 127.0.0.1
	ruvoy * %s
}
`, servers, port, path))
	return s
}

// runCaddyfile serves text as the Caddyfile under `ruvoy run`, listening
// on port, and returns the server once it listens, and the file.
func runCaddyfile(t *testing.T, port, text string) (*server, string) {
	t.Helper()
	caddyfile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s := launch(t, port, "run", "--config", caddyfile, "--adapter", "caddyfile")
	s.waitReady(t)
	return s, caddyfile
}

func (s *server) waitReady(t testing.TB) {
	t.Helper()
	switch err := testserver.WaitListening(s.addr, 60*time.Second, s.done); err {
	case nil:
	case testserver.ErrExited:
		t.Fatalf("ruvoy exited before listening: %v\nstdout:\n%s\nstderr:\n%s", s.err, s.stdout, s.stderr)
	default:
		t.Fatalf("ruvoy: %v", err)
	}
}

// stop sends SIGTERM and returns the exit code (-1: killed by a signal).
func (s *server) stop() int {
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			s.t.Errorf("ruvoy did not stop within 30s of SIGTERM")
		}
	}
	return s.cmd.ProcessState.ExitCode()
}

// wait waits for the process to exit by itself.
func (s *server) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(d):
		t.Fatalf("ruvoy still running after %v", d)
	}
	return s.cmd.ProcessState.ExitCode()
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
	MaxIdleConnsPerHost: 200,
	DisableCompression:  true,
}}

type response struct {
	status int
	header http.Header
	body   string
}

func (s *server) do(t testing.TB, method, path string, body io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{res.StatusCode, res.Header, string(b)}
}

func (s *server) get(t testing.TB, path string) response {
	t.Helper()
	return s.do(t, "GET", path, nil)
}

// getList GETs path, whose answer is a JSON list of strings.
func (s *server) getList(t testing.TB, path string) []string {
	t.Helper()
	var list []string
	if err := json.Unmarshal([]byte(s.get(t, path).body), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

// raw sends bytes over a new connection and returns all it reads until the
// server closes it or goes quiet.
func (s *server) raw(t testing.TB, request string) string {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// rawRequest sends bytes over a new connection and parses the answer.
func (s *server) rawRequest(t testing.TB, request string) response {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, string(b)}
}

// inGoroutine is t for a goroutine the test started. t.Fatal must be
// called from the test's own goroutine; in another, the helpers' fatal
// checks (s.get, equal, ...) instead fail the test and end that goroutine
// alone, its deferred calls run (a WaitGroup's Done).
func inGoroutine(t testing.TB) testing.TB { return goroutineT{t} }

type goroutineT struct{ testing.TB }

func (g goroutineT) Fatal(args ...any) {
	g.Helper()
	g.Error(args...)
	runtime.Goexit()
}

func (g goroutineT) Fatalf(format string, args ...any) {
	g.Helper()
	g.Errorf(format, args...)
	runtime.Goexit()
}

func (g goroutineT) FailNow() {
	g.Fail()
	runtime.Goexit()
}

// background runs f in a goroutine (with inGoroutine's t) and returns its
// result's channel, closed without a value when f failed: a test waiting
// on it then goes on (to fail) instead of hanging.
func background[T any](t testing.TB, f func(t testing.TB) T) <-chan T {
	ch := make(chan T, 1)
	go func() {
		defer close(ch)
		ch <- f(inGoroutine(t))
	}()
	return ch
}

// eventually retries check until it passes or the time is up.
func eventually(t testing.TB, d time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStdout waits for want on the server's stdout. The banner is printed
// after the listeners are up, so a client can be answered before it appears.
func (s *server) waitStdout(t testing.TB, what, want string) {
	t.Helper()
	eventually(t, 10*time.Second, what+": stdout never contained "+strconv.Quote(want), func() bool {
		return strings.Contains(s.stdout.String(), want)
	})
}

func app(name string) string { return filepath.Join("apps", name) }

func mustContain(t testing.TB, what, haystack, needle string) {
	t.Helper()
	if !strings.Contains(haystack, needle) {
		t.Fatalf("%s: %q not found in:\n%s", what, needle, haystack)
	}
}

func equal[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func rubyVersion(t testing.TB) string {
	out, err := exec.Command("ruby", "-e", "print RUBY_VERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
