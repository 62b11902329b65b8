package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The console: what `ruvoy config.ru` says on stdout as it starts and
// stops. On a terminal it reads as Puma's does; otherwise it is JSON
// lines, as the log is.

// terminal is a pseudo-terminal a command runs in, as at a shell: what it
// writes to stdout and stderr lands in out; ctrlC types Ctrl-C, which the
// terminal turns into SIGINT for its foreground processes.
type terminal struct {
	master *os.File
	out    *output
}

// launchTerminal starts cmd in directory dir, with env added, on a new
// terminal, and returns once it listens on addr. It gets SIGTERM when
// the test ends, if it still runs.
func launchTerminal(t *testing.T, cmd *exec.Cmd, dir string, env []string, addr string) (*server, *terminal) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{master: master, out: &output{}}
	s := &server{t: t, addr: addr, url: "http://" + addr, cmd: cmd, stdout: term.out, stderr: &output{}, done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.Env = append(append(os.Environ(), "RACK_ENV=test"), env...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	read := make(chan struct{})
	go func() { io.Copy(term.out, master); close(read) }() // until the terminal closes (EIO)
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
		}
		master.Close()
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "[BUG]", "fatal error:"} {
			if strings.Contains(term.out.String(), bad) {
				t.Errorf("%s has %q on its terminal", cmd.Path, bad)
			}
		}
		if t.Failed() {
			t.Logf("the terminal of %s:\n%s", cmd.Path, term.out)
		}
	})
	s.waitReady(t)
	return s, term
}

// ctrlC types Ctrl-C.
func (term *terminal) ctrlC(t *testing.T) {
	t.Helper()
	if _, err := term.master.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
}

// lines is what the terminal showed, line by line.
func (term *terminal) lines() []string {
	text := strings.ReplaceAll(term.out.String(), "\r\n", "\n")
	return strings.Split(strings.TrimRight(text, "\n"), "\n")
}

// waitFor waits until the terminal shows want.
func (term *terminal) waitFor(t *testing.T, what, want string) {
	t.Helper()
	eventually(t, 60*time.Second, what+": the terminal never showed "+strconv.Quote(want), func() bool {
		return strings.Contains(strings.ReplaceAll(term.out.String(), "\r\n", "\n"), want)
	})
}

// hasLines checks that the terminal showed want, each a whole line, in
// this order (other lines may come between).
func hasLines(t *testing.T, what string, lines []string, want ...string) {
	t.Helper()
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.TrimPrefix(l, "^C") == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("%s: no line %q (after the lines before it) in:\n%s", what, want[i], strings.Join(lines, "\n"))
	}
}

// A person at a terminal: Puma's layout, with the pid and what it listens
// on, "Use Ctrl-C to stop"; Ctrl-C, then one line on how the stop went and
// nothing of Caddy's farewell. In one process, and with forked workers.
func TestCoreConsoleOnATerminal(t *testing.T) {
	for _, mode := range []struct {
		name string
		args []string
		head []string // the lines after the version's, up to the addresses
	}{
		{"one process", nil, []string{"*  Environment: test", "*          PID: %d"}},
		{"workers", []string{"-w", "2", "--preload"},
			[]string{"*  Environment: test", "*   Master PID: %d", "*      Workers: 2, forked from the app booted once (--preload)"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			port := freePort(t)
			args := append(append([]string{"-p", port}, mode.args...), app("core.ru"))
			s, term := launchTerminal(t, exec.Command(binary(t), args...), "", nil, "127.0.0.1:"+port)
			term.waitFor(t, "the banner", "Use Ctrl-C to stop")
			equal(t, "a request", s.get(t, "/raw/hello").body, "hello world")
			want := []string{"ruvoy 0.1.0 (ruby " + rubyVersion(t) + ", caddy v2.11.9): serving apps/core.ru"}
			for _, l := range mode.head {
				if strings.Contains(l, "%d") {
					l = fmt.Sprintf(l, s.cmd.Process.Pid)
				}
				want = append(want, l)
			}
			want = append(want, "* Listening on http://127.0.0.1:"+port, "Use Ctrl-C to stop")
			hasLines(t, "the banner", term.lines(), want...)
			term.ctrlC(t)
			lines := stoppedAs(t, s, "SIGINT", nil)
			for _, l := range lines {
				// The console's own lines are text here (a worker's log is its own).
				if strings.Contains(l, "byeee") || strings.Contains(l, "exiting;") || strings.Contains(l, "workers serving") ||
					strings.Contains(l, `"logger":"ruvoy"`) {
					t.Fatalf("the terminal shows %q", l)
				}
			}
		})
	}
}

// stoppedAs waits for the server to exit after signal and checks its
// last line (read by msg, nil: as it is) says so, with exit status 0.
func stoppedAs(t *testing.T, s *server, signal string, msg func(string) string) []string {
	t.Helper()
	code := s.wait(t, 30*time.Second)
	// On a terminal what the process wrote last may still be on its way
	// from the pseudo-terminal when the process has exited.
	eventually(t, 10*time.Second, "the stop's line", func() bool { return strings.Contains(s.stdout.String(), "ruvoy: stopped (") })
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s.stdout.String(), "\r\n", "\n"), "\n"), "\n")
	last := strings.TrimPrefix(lines[len(lines)-1], "^C")
	if msg != nil {
		last = msg(last)
	}
	clean := "ruvoy: stopped (" + signal + "): every request finished; the app's at_exit hooks ran; exit status 0"
	// The last request may still be ending in Ruby (its body closed) as
	// the signal comes.
	settling := "ruvoy: stopped (" + signal + "): the request in flight finished; the app's at_exit hooks ran; exit status 0"
	if code != 0 || (last != clean && last != settling) {
		t.Fatalf("exit status %d, the last line %q", code, last)
	}
	return lines
}

// consoleEntry is a JSON line of the console (stdout).
func consoleEntry(t *testing.T, s *server, prefix string) map[string]any {
	t.Helper()
	var hit map[string]any
	eventually(t, 30*time.Second, "a console line "+strconv.Quote(prefix), func() bool {
		for _, line := range strings.Split(s.stdout.String(), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil && strings.HasPrefix(fmt.Sprint(e["msg"]), prefix) {
				hit = e
				return true
			}
		}
		return false
	})
	return hit
}

// Not on a terminal, the same facts as JSON lines, where the log is JSON
// too: the banner with every address (localhost is 127.0.0.1 and ::1, as
// Puma binds it; TLS adds HTTP/3's), and the stop's one line, last.
func TestCoreConsoleAsJSON(t *testing.T) {
	c := makeCerts(t)
	for _, mode := range []struct {
		name   string
		args   []string
		listen func(port string) []any
	}{
		{"one process", []string{"-a", "localhost"}, func(p string) []any {
			return []any{"http://127.0.0.1:" + p, "http://[::1]:" + p}
		}},
		{"workers", []string{"-w", "2", "--preload"}, func(p string) []any { return []any{"http://127.0.0.1:" + p} }},
		{"tls", []string{"--tls-cert", c.serverCert, "--tls-key", c.serverKey}, func(p string) []any {
			return []any{"https://127.0.0.1:" + p + " (HTTP/1.1, HTTP/2)", "https://127.0.0.1:" + p + " (HTTP/3, UDP)"}
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := start(t, append(mode.args, app("core.ru"))...)
			port := s.addr[strings.LastIndexByte(s.addr, ':')+1:]
			b := consoleEntry(t, s, "ruvoy 0.1.0 (ruby ")
			scheme := "http"
			if len(mode.args) > 0 && mode.args[0] == "--tls-cert" {
				scheme = "https"
			}
			equal(t, "msg", b["msg"], any("ruvoy 0.1.0 (ruby "+rubyVersion(t)+", caddy v2.11.9): serving apps/core.ru on "+scheme+"://127.0.0.1:"+port))
			for k, v := range map[string]any{"logger": "ruvoy", "level": "info", "version": "0.1.0", "ruby": rubyVersion(t),
				"environment": "test", "pid": float64(s.cmd.Process.Pid), "workers": float64(0), "preload": false} {
				if mode.name == "workers" && (k == "workers" || k == "preload") {
					v = map[string]any{"workers": float64(2), "preload": true}[k]
				}
				equal(t, k, fmt.Sprint(b[k]), fmt.Sprint(v))
			}
			equal(t, "listen", fmt.Sprint(b["listen"]), fmt.Sprint(mode.listen(port)))
			if mode.name == "one process" {
				// Both loopback addresses answer.
				for _, host := range []string{"127.0.0.1", "[::1]"} {
					res, err := client.Get("http://" + host + ":" + port + "/raw/hello")
					if err != nil {
						t.Fatalf("%s: %v", host, err)
					}
					res.Body.Close()
					equal(t, host, res.StatusCode, 200)
				}
			}
			if strings.Contains(s.stderr.String(), "workers serving") {
				t.Fatalf("the log tells of the workers beside the banner:\n%s", s.stderr)
			}
			s.cmd.Process.Signal(syscall.SIGTERM)
			var last map[string]any
			stoppedAs(t, s, "SIGTERM", func(line string) string {
				if err := json.Unmarshal([]byte(line), &last); err != nil {
					t.Fatalf("the last line is not JSON: %q", line)
				}
				return fmt.Sprint(last["msg"])
			})
			equal(t, "its signal", last["signal"], any("SIGTERM"))
			equal(t, "its exit status", last["exit_status"], any(0.0))
			if strings.Contains(s.stderr.String(), "byeee") || strings.Contains(s.stderr.String(), "exiting;") {
				t.Fatalf("the log has Caddy's farewell:\n%s", s.stderr)
			}
		})
	}
}

// -a localhost binds 127.0.0.1 and ::1, as Puma's -b tcp://localhost does.
func TestCoreConsoleLocalhostAsPuma(t *testing.T) {
	_, err := exec.LookPath("puma")
	need(t, err == nil, "puma")
	reachable := func(port string) []string {
		var ok []string
		for _, host := range []string{"127.0.0.1", "::1"} {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second); err == nil {
				c.Close()
				ok = append(ok, host)
			}
		}
		return ok
	}
	ours := start(t, "-a", "localhost", app("core.ru"))
	ourPort := ours.addr[strings.LastIndexByte(ours.addr, ':')+1:]
	port := freePort(t)
	puma := exec.Command("puma", "-b", "tcp://localhost:"+port, app("core.ru"))
	puma.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := puma.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-puma.Process.Pid, syscall.SIGKILL); puma.Wait() }()
	eventually(t, 60*time.Second, "puma listening", func() bool { return len(reachable(port)) > 0 })
	time.Sleep(500 * time.Millisecond) // Puma binds its addresses one after the other
	equal(t, "the addresses that answer", fmt.Sprint(reachable(ourPort)), fmt.Sprint(reachable(port)))
	equal(t, "both", len(reachable(ourPort)), 2)
}

// railsOnTerminal runs `bin/rails server` (server: "ruvoy", or "" for
// Rails' default, Puma) in dir on a terminal, in development, as `rails
// new` makes it: localhost.
func railsOnTerminal(t *testing.T, dir string, env []string, server string) (*server, *terminal, string) {
	t.Helper()
	port := freePort(t)
	args := []string{"server", "-p", port}
	if server != "" {
		args = append(args, "-u", server)
	}
	cmd := exec.Command("bin/rails", args...)
	s, term := launchTerminal(t, cmd, dir, append(env, "RACK_ENV=", "RAILS_ENV=development"), "127.0.0.1:"+port)
	return s, term, port
}

// `rails server -u ruvoy` reads as `rails server` under Puma does: Rails'
// lines first, the server's banner with both loopback addresses, the
// request log, and at Ctrl-C the server's last words, then Rails'
// "Exiting", last.
func TestFrameworksConsoleRailsServer(t *testing.T) {
	lib := mustAbs(t, "../lib")
	handlerEnv := []string{"RUBYLIB=" + lib, "RUVOY_BIN=" + binary(t)}
	out, _ := exec.Command("ruby", "-e", `require "rails/version"; print Rails::VERSION::STRING`).Output()
	railsVersion := string(out)
	for _, server := range []string{"ruvoy", "puma"} {
		t.Run(server, func(t *testing.T) {
			dir, env := railsApp(t, "RAILS_ENV=development")
			name := "Puma"
			if server == "ruvoy" {
				env = append(env, handlerEnv...)
				name = "Ruvoy"
			}
			s, term, port := railsOnTerminal(t, dir, env, map[string]string{"ruvoy": "ruvoy", "puma": ""}[server])
			term.waitFor(t, "the banner", "Use Ctrl-C to stop")
			res, err := client.Get("http://[::1]:" + port + "/articles")
			if err != nil {
				t.Fatalf("GET http://[::1]:%s/articles: %v", port, err)
			}
			res.Body.Close()
			equal(t, "GET /articles over ::1", res.StatusCode, http.StatusOK)
			term.waitFor(t, "the request log", `Started GET "/articles" for ::1`)
			lines := term.lines()
			listening := []string{"* Listening on http://127.0.0.1:" + port, "* Listening on http://[::1]:" + port, "Use Ctrl-C to stop"}
			hasLines(t, "the start", lines, append([]string{"=> Booting " + name}, listening...)...)
			prefix := "=> Rails " + railsVersion + " application starting in development"
			found := false
			for _, l := range lines {
				found = found || strings.HasPrefix(l, prefix)
			}
			if !found {
				t.Fatalf("no line %q", prefix)
			}
			term.ctrlC(t)
			equal(t, "exit status", s.wait(t, 60*time.Second), 0)
			lines = term.lines()
			equal(t, "the last line", lines[len(lines)-1], "Exiting")
			if server == "ruvoy" {
				equal(t, "the server's last words", strings.TrimPrefix(lines[len(lines)-2], "^C"),
					"ruvoy: stopped (SIGINT): every request finished; the app's at_exit hooks ran; exit status 0")
				for _, l := range lines {
					if strings.Contains(l, "byeee") || strings.HasPrefix(l, "ruvoy: /") || strings.HasPrefix(strings.TrimPrefix(l, "^C"), "{") {
						t.Fatalf("the terminal shows %q", l)
					}
				}
			}
		})
	}
}
