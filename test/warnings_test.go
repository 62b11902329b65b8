package test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Warnings that apply: each says what happened and what to do about it,
// and is not given where it does not apply.

// holdLines is the log's hold reports: the offload advice, the loading
// warning, and development's own.
func holdLines(s *server) (offload, loading, development []map[string]any) {
	return logLines(s, "the VM thread is held by one request: other requests wait (wrap blocking calls in Ruvoy.offload)"),
		logLines(s, "the VM thread is held by one request loading or compiling code (require, autoload, templates, assets): other requests wait; load it at boot (Rails: config.eager_load)"),
		logLines(s, "a request held the VM thread with development's own work (code loaded or compiled on first use: require, autoload, templates, assets; an error page): Ruvoy.offload cannot help there, and such holds are not reported again (other holds are)")
}

func backtraceHas(e map[string]any, part string) bool {
	return strings.Contains(fmt.Sprint(e["backtrace"]), part)
}

// The hold detector reads the backtrace: code loading or compiling (a file
// loaded, a template compiled) is not the offload's case. In development,
// where code loads on first use, it is said once, at info; elsewhere it
// is a warning to load the code at boot. A request's own computing gets
// the offload advice everywhere.
func TestCoreWarnHoldWhileLoading(t *testing.T) {
	t.Run("development", func(t *testing.T) {
		s := startEnv(t, []string{"RACK_ENV=development"}, "-e", "development", app("warnings.ru"))
		equal(t, "/compile", s.get(t, "/compile").body, "done")
		eventually(t, 10*time.Second, "development's hold report", func() bool {
			_, _, dev := holdLines(s)
			return len(dev) == 1
		})
		_, _, dev := holdLines(s)
		equal(t, "its level", dev[0]["level"], any("info"))
		equal(t, "its path", dev[0]["path"], any("/compile"))
		if bt, _ := dev[0]["backtrace"].([]any); len(bt) != 1 || !strings.HasSuffix(fmt.Sprint(bt[0]), "compile'") {
			t.Fatalf("the backtrace is not the compiler's frame alone: %v", dev[0]["backtrace"])
		}
		equal(t, "/load", s.get(t, "/load").body, "done")
		equal(t, "/busy", s.get(t, "/busy").body, "done")
		eventually(t, 10*time.Second, "the offload advice for /busy", func() bool {
			offload, _, _ := holdLines(s)
			return len(offload) == 1
		})
		offload, loading, dev := holdLines(s)
		equal(t, "the offload advice's path", offload[0]["path"], any("/busy"))
		equal(t, "loading warnings", len(loading), 0)
		equal(t, "development's reports (once)", len(dev), 1)
	})
	t.Run("production", func(t *testing.T) {
		s := startEnv(t, []string{"RACK_ENV=production"}, "-e", "production", app("warnings.ru"))
		for _, path := range []string{"/load", "/compile", "/busy"} {
			equal(t, path, s.get(t, path).body, "done")
		}
		eventually(t, 10*time.Second, "three hold warnings", func() bool {
			offload, loading, _ := holdLines(s)
			return len(offload) == 1 && len(loading) == 2
		})
		_, loading, dev := holdLines(s)
		equal(t, "development's reports", len(dev), 0)
		equal(t, "the first loading warning", loading[0]["path"], any("/load"))
		if !backtraceHas(loading[0], "warnings_slow_file.rb") {
			t.Fatalf("the backtrace is not the loaded file's: %v", loading[0]["backtrace"])
		}
		equal(t, "its level", loading[0]["level"], any("warn"))
		equal(t, "the second", loading[1]["path"], any("/compile"))
	})
}

const sendfileWarning = "ruvoy: the app set X-Sendfile to have the server send a file, but no --sendfile-dir (Caddyfile: sendfile_dirs) " +
	"allows one: the header goes on as it is, and the client gets the app's body (empty under Rack::Sendfile) " +
	"unless a proxy in front sends the file; said once"

// An app that sets X-Sendfile with no --sendfile-dir is told so once (not
// at every request), in one process and through workers; a request whose
// proxy says it sends files (X-Sendfile-Type) is not warned of.
func TestCoreWarnSendfileWithoutDir(t *testing.T) {
	for _, mode := range [][]string{nil, {"-w", "2"}} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			s := start(t, append(mode, app("warnings.ru"))...)
			for range 3 {
				r := s.get(t, "/sendfile")
				equal(t, "the header, passed on", r.header.Get("X-Sendfile"), mustAbs(t, "apps/file.txt"))
				equal(t, "the app's body", r.body, "")
			}
			eventually(t, 5*time.Second, "the warning", func() bool { return len(logLines(s, sendfileWarning)) > 0 })
			time.Sleep(200 * time.Millisecond)
			lines := logLines(s, sendfileWarning)
			equal(t, "warnings", len(lines), 1)
			equal(t, "its file", lines[0]["file"], any(mustAbs(t, "apps/file.txt")))
			equal(t, "its path", lines[0]["path"], any("/sendfile"))

			proxied := start(t, append(mode, app("warnings.ru"))...)
			proxied.do(t, "GET", "/sendfile", nil, "X-Sendfile-Type", "X-Sendfile")
			equal(t, "another request", proxied.get(t, "/busy").body, "done")
			equal(t, "warnings behind a proxy that sends files", len(logLines(proxied, sendfileWarning)), 0)
		})
	}
	// With a directory, no warning: the file is sent.
	s := start(t, "--sendfile-dir", "apps", app("warnings.ru"))
	equal(t, "the file, sent", s.get(t, "/sendfile").body, "a file body, sent by Go\n")
	equal(t, "warnings with a directory", len(logLines(s, sendfileWarning)), 0)
}

// Go's answer to plain HTTP on a TLS port, as Caddy alone and nginx give it.
const plainHTTPRefusal = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

func plainHTTPTo(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// Plain HTTP to the TLS port gets a 400 and a sentence, as from Caddy
// alone (Go's server), not an empty reply; TLS clients beside it are
// served. In one process and through workers.
func TestCoreWarnPlainHTTPOnTLSPort(t *testing.T) {
	c := makeCerts(t)
	tlsClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool}}}
	for _, mode := range [][]string{nil, {"-w", "2"}} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			s := start(t, append(mode, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, app("core.ru"))...)
			equal(t, "plain HTTP", plainHTTPTo(t, s.addr), plainHTTPRefusal)
			res, err := tlsClient.Get("https://" + s.addr + "/raw/hello")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			equal(t, "a TLS client", string(b), "hello world")
		})
	}
	// Caddy alone, on the same certificate.
	port := freePort(t)
	caddy, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}
https://127.0.0.1:%s {
	tls %s %s
	respond "hi"
}
`, port, c.serverCert, c.serverKey))
	equal(t, "Caddy alone", plainHTTPTo(t, caddy.addr), plainHTTPRefusal)
}

// gemApp is a rackup beside a Gemfile that lists a gem this machine does
// not have.
func gemApp(t *testing.T, rackup string) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Gemfile"), []byte("source \"https://rubygems.org\"\ngem \"rack\"\ngem \"no_such_gem_for_ruvoy\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "config.ru"), []byte(rackup), 0o644)
	return dir
}

// A missing gem is one line, Bundler's, as Puma's "Unable to load
// application" gives it: not Bundler's frames. A load error is one line
// and the backtrace below it. In one process, with workers, with
// --preload: the same, and nothing else (no worker's exit).
func TestCoreWarnBootErrors(t *testing.T) {
	missing := "Could not find gem 'no_such_gem_for_ruvoy'"
	dir := gemApp(t, "run ->(env) { [200, {}, [\"never\"]] }\n")
	for _, mode := range [][]string{nil, {"-w", "2"}, {"-w", "2", "--preload"}} {
		t.Run("missing gem "+fmt.Sprint(mode), func(t *testing.T) {
			port := freePort(t)
			s := launchIn(t, dir, nil, port, append([]string{"-p", port}, append(mode, "config.ru")...)...)
			equal(t, "exit status", s.wait(t, 60*time.Second), 1)
			lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
			first := lines[0]
			if !strings.HasPrefix(first, "ruvoy: config.ru failed to load: "+missing) || !strings.HasSuffix(first, "(Bundler::GemNotFound)") {
				t.Fatalf("the first line is %q", first)
			}
			equal(t, "the line after", lines[len(lines)-1], "\tBundler read "+filepath.Join(dir, "Gemfile"))
			for _, l := range lines {
				if strings.Contains(l, "/lib/bundler") || strings.Contains(l, "<ruvoy>") || strings.HasPrefix(l, "{") {
					t.Fatalf("stderr has %q:\n%s", l, s.stderr)
				}
			}
		})
		t.Run("load error "+fmt.Sprint(mode), func(t *testing.T) {
			port := freePort(t)
			s := launch(t, port, append([]string{"-p", port}, append(mode, app("boot_loaderror.ru"))...)...)
			equal(t, "exit status", s.wait(t, 60*time.Second), 1)
			lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
			equal(t, "the first line", lines[0],
				"ruvoy: apps/boot_loaderror.ru failed to load: cannot load such file -- no_such_library_for_ruvoy (LoadError)")
			found := false
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, "\t") || strings.Contains(l, "<ruvoy>") {
					t.Fatalf("a line that is not the backtrace's: %q\n%s", l, s.stderr)
				}
				found = found || strings.Contains(l, "boot_loaderror.ru:1:in ")
			}
			if !found {
				t.Fatalf("no frame of the rackup:\n%s", s.stderr)
			}
		})
	}
	// Puma's line carries Bundler's same sentence.
	if _, err := exec.LookPath("puma"); err == nil {
		pumaDir := gemApp(t, "require \"bundler/setup\"\nrun ->(env) { [200, {}, [\"never\"]] }\n")
		cmd := exec.Command("puma", "-b", "tcp://127.0.0.1:"+freePort(t), "config.ru")
		cmd.Dir = pumaDir
		cmd.Env = append(os.Environ(), "BUNDLE_GEMFILE="+filepath.Join(pumaDir, "Gemfile"))
		out, _ := runWithTimeout(cmd, 60*time.Second)
		mustContain(t, "Puma's output", out, "! Unable to load application: Bundler::GemNotFound: "+missing)
	}
}

// A port in use: who holds it is named when /proc tells (a process of
// this user's), and another ruvoy is told apart, with the way to share.
func TestCoreWarnPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	s := launch(t, port, "-p", port, app("core.ru"))
	equal(t, "exit status", s.wait(t, 30*time.Second), 1)
	self, _ := os.Executable()
	mustContain(t, "the refusal", s.stderr.String(),
		fmt.Sprintf("ruvoy: 127.0.0.1:%s is already in use by pid %d (%s", port, os.Getpid(), self))

	first := start(t, app("core.ru"))
	port = first.addr[strings.LastIndexByte(first.addr, ':')+1:]
	second := launch(t, port, "-p", port, app("core.ru"))
	equal(t, "exit status", second.wait(t, 30*time.Second), 1)
	mustContain(t, "the refusal", second.stderr.String(),
		fmt.Sprintf("ruvoy: 127.0.0.1:%s is already in use by another ruvoy (pid %d: %s -p %s apps/core.ru); --reuse-port shares it on purpose",
			port, first.cmd.Process.Pid, binary(t), port))
}
