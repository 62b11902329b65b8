package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestCoreBootErrors(t *testing.T) {
	cases := []struct{ rackup, want string }{
		{"apps/no_such_file.ru", "no rackup file at"},
		{"apps/boot_syntax.ru", "SyntaxError"},
		{"apps/boot_loaderror.ru", "cannot load such file -- no_such_library_for_ruvoy (LoadError)"},
		{"apps/boot_raise.ru", "boom while building the app (ArgumentError)"},
		{"apps/boot_notapp.ru", "did not build a Rack app"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.rackup), func(t *testing.T) {
			port := freePort(t)
			s := launch(t, port, "-p", port, c.rackup)
			code := s.wait(t, 60*time.Second)
			equal(t, "exit code", code, 1)
			mustContain(t, "stderr", s.stderr.String(), c.want)
			if strings.Contains(s.stdout.String(), "serving") {
				t.Fatalf("it said it was serving:\n%s", s.stdout)
			}
			if c.rackup != "apps/boot_syntax.ru" && !strings.Contains(c.rackup, "no_such") && !strings.Contains(c.rackup, "notapp") {
				mustContain(t, "backtrace", s.stderr.String(), filepath.Base(c.rackup)+":")
			}
			if !strings.Contains(c.rackup, "no_such_file") {
				// Ruby's error, not Caddy's chain of what it provisioned.
				mustContain(t, "stderr", s.stderr.String(), "ruvoy: "+c.rackup+" failed to load: ")
				if strings.Contains(s.stderr.String(), "provision") {
					t.Fatalf("stderr has Caddy's provisioning chain:\n%s", s.stderr)
				}
			}
		})
	}
}

func TestCoreOutputAndArgv(t *testing.T) {
	s := start(t, app("core.ru"))
	bin := binary(t)
	mustContain(t, "stdout", s.stdout.String(),
		fmt.Sprintf(`core.ru loading: $0=%s ARGV=["apps/core.ru"] RACK_ENV=test`, bin))
	mustContain(t, "stderr", s.stderr.String(), "core.ru warning on stderr")
}

// SIGTERM: stop accepting, let requests in flight finish, run at_exit, exit 0.
func TestCoreSigtermDrains(t *testing.T) {
	s := start(t, app("core.ru"))
	var wg sync.WaitGroup
	results := make(chan string, 5)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- statusAndBody(s.url + "/sleep?s=1")
		}()
	}
	time.Sleep(300 * time.Millisecond)
	s.cmd.Process.Signal(syscall.SIGTERM)
	wg.Wait()
	close(results)
	for r := range results {
		equal(t, "a request in flight at SIGTERM", r, "200 slept")
	}
	equal(t, "exit code", s.wait(t, 20*time.Second), 0)
	mustContain(t, "stdout", s.stdout.String(), "core.ru at_exit ran")
	// What the stop said: that it began, with the requests it lets finish,
	// and, last, how it ended.
	began := consoleEntry(t, s, "ruvoy: gracefully stopping (SIGTERM): no new connections; the 5 requests in flight may finish for up to 10s")
	equal(t, "requests in flight at the stop", began["requests"], any(5.0))
	lines := strings.Split(strings.TrimSpace(s.stdout.String()), "\n")
	mustContain(t, "the last line", lines[len(lines)-1],
		`"msg":"ruvoy: stopped (SIGTERM): the 5 requests in flight finished; the app's at_exit hooks ran; exit status 0","signal":"SIGTERM","requests":5,"exit_status":0}`)
}

func TestCoreAppCannotTrapServerSignals(t *testing.T) {
	s := start(t, app("trap.ru"))
	mustContain(t, "stderr", s.stderr.String(), "ruvoy: ignoring trap(TERM)")
	mustContain(t, "stderr", s.stderr.String(), "ruvoy: ignoring trap(INT)")
	s.cmd.Process.Signal(syscall.SIGWINCH) // the app may keep signals the server does not use
	eventually(t, 5*time.Second, "the app's WINCH trap", func() bool {
		return strings.Contains(s.stdout.String(), "the app's WINCH trap ran")
	})
	slow := background(t, func(t testing.TB) response { return s.get(t, "/slow") })
	time.Sleep(100 * time.Millisecond)
	s.cmd.Process.Signal(syscall.SIGINT)
	equal(t, "the request in flight at SIGINT", (<-slow).status, 200)
	equal(t, "exit code", s.wait(t, 20*time.Second), 0)
	out := s.stdout.String()
	mustContain(t, "stdout", out, "trap.ru at_exit ran")
	if strings.Contains(out, "TERM trap ran") || strings.Contains(out, "INT trap ran") {
		t.Fatalf("the app's trap took a server signal:\n%s", out)
	}
}

// A config reload through the admin API rebuilds the app in the same VM
// while requests keep flowing: none fails, and new ones reach the new app.
func TestCoreReloadUnderLoad(t *testing.T) {
	adminPort := freePort(t)
	s := start(t, "--admin-port", adminPort, app("reload_v1.ru"))
	admin := "http://127.0.0.1:" + adminPort
	equal(t, "before", s.get(t, "/").body, "v1")

	var stop atomic.Bool
	var ok, failed atomic.Int64
	var failures sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := client.Get(s.url + "/")
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
					continue
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || (string(b) != "v1" && string(b) != "v2") {
					failed.Add(1)
					failures.Store(fmt.Sprintf("%d %s", res.StatusCode, b), true)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)

	v2, _ := filepath.Abs(app("reload_v2.ru"))
	newCfg := reloadToV2(t, admin)
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	failures.Range(func(k, _ any) bool { t.Errorf("failed during reload: %v", k); return true })
	equal(t, "failed requests", failed.Load(), int64(0))
	if ok.Load() < 100 {
		t.Fatalf("only %d requests went through", ok.Load())
	}
	equal(t, "after", s.get(t, "/").body, "v2")
	mustContain(t, "config", newCfg, v2)
}

// On a reload Caddy cleans up the old config's handlers once its old server
// has begun to shut down, while that server still passes on requests it has
// read. Here one waits in forward_auth (a Caddy handler before ruvoy's)
// across a whole reload, then reaches the old handler: it must get the old
// app, not a 503.
func TestCoreReloadKeepsOldAppForItsRequests(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-Uri") == "/held" {
			arrived <- struct{}{}
			<-release
		}
	}))
	defer auth.Close()
	var releaseOnce sync.Once
	// On a failure the held check must end first, or auth.Close waits for it.
	defer releaseOnce.Do(func() { close(release) })

	port, adminPort := freePort(t), freePort(t)
	rackup, _ := filepath.Abs(app("reload_v1.ru"))
	caddyfile := filepath.Join(t.TempDir(), "Caddyfile")
	os.WriteFile(caddyfile, []byte(fmt.Sprintf(`{
	admin 127.0.0.1:%s
	auto_https off
	persist_config off
}
http://127.0.0.1:%s {
	route {
		forward_auth %s {
			uri /check
		}
		ruvoy * %s
	}
}
`, adminPort, port, strings.TrimPrefix(auth.URL, "http://"), rackup)), 0o644)
	s := launch(t, port, "run", "--config", caddyfile, "--adapter", "caddyfile")
	s.waitReady(t)
	equal(t, "before", s.get(t, "/").body, "v1")

	held := make(chan string, 1)
	go func() { held <- statusAndBody(s.url + "/held") }()
	<-arrived

	reloadToV2(t, "http://127.0.0.1:"+adminPort)
	// On a new connection: a keep-alive one from before may still be the
	// old server's, which serves what it reads with the old app.
	fresh := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	equal(t, "after the reload", statusAndBodyWith(fresh, s.url+"/"), "200 v2")

	releaseOnce.Do(func() { close(release) })
	equal(t, "the request the old server read", <-held, "200 v1")
}

// statusAndBody GETs url and says "STATUS BODY", or the error; it calls no
// t method, so goroutines may use it.
func statusAndBody(url string) string { return statusAndBodyWith(client, url) }

// statusAndBodyWith is statusAndBody with client c.
func statusAndBodyWith(c *http.Client, url string) string {
	res, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return fmt.Sprintf("%d %s", res.StatusCode, b)
}

// reloadToV2 swaps reload_v1.ru for reload_v2.ru in the running config
// through the admin API at admin, and returns the config it loaded.
func reloadToV2(t *testing.T, admin string) string {
	t.Helper()
	res, err := adminDo("GET", admin+"/config/", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	newCfg := strings.Replace(string(cfg), "reload_v1.ru", "reload_v2.ru", 1)
	if newCfg == string(cfg) {
		t.Fatalf("the running config does not name reload_v1.ru:\n%s", cfg)
	}
	res, err = adminDo("POST", admin+"/load", strings.NewReader(newCfg))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "POST /load status "+string(body), res.StatusCode, 200)
	return newCfg
}

func TestCoreCaddyfile(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	rackup, _ := filepath.Abs(app("core.ru"))
	caddyfile := filepath.Join(dir, "Caddyfile")
	os.WriteFile(caddyfile, []byte(fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}
http://127.0.0.1:%s {
	# An absolute path first would read as a path matcher: "*" matches all.
	ruvoy * %s {
		environment staging
	}
}
`, port, rackup)), 0o644)
	s := launch(t, port, "run", "--config", caddyfile, "--adapter", "caddyfile")
	s.waitReady(t)
	equal(t, "body", s.get(t, "/raw/hello").body, "hello world")
	mustContain(t, "RACK_ENV from the Caddyfile", s.stdout.String(), "RACK_ENV=staging")
	equal(t, "exit code after SIGTERM", s.stop(), 0)
	mustContain(t, "at_exit under ruvoy run", s.stdout.String(), "core.ru at_exit ran")
}

func TestCoreCommandLine(t *testing.T) {
	bin := binary(t)
	run := func(args ...string) (string, int) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		}
		return string(out), code
	}
	out, code := run("--help")
	equal(t, "--help exit code", code, 0)
	mustContain(t, "--help", out, "Usage: ruvoy [options] [config.ru]")
	mustContain(t, "--help", out, "-p, --port PORT")

	out, code = run("--version")
	equal(t, "--version exit code", code, 0)
	mustContain(t, "--version", out, "ruvoy 0.1.0 (ruby "+rubyVersion(t)+", caddy v2.11.9)")

	out, code = run("--no-such-option")
	equal(t, "unknown option exit code", code, 2)
	mustContain(t, "unknown option", out, "unknown option --no-such-option")

	out, code = run("list-modules")
	equal(t, "list-modules exit code", code, 0)
	mustContain(t, "list-modules", out, "http.handlers.ruvoy")

	// --print-config prints exactly what the server runs: running that JSON
	// with `ruvoy run` serves the same app.
	port := freePort(t)
	out, code = run("--print-config", "-p", port, app("core.ru"))
	equal(t, "--print-config exit code", code, 0)
	var cfg map[string]any
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("--print-config is not JSON: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "ruvoy.json")
	os.WriteFile(path, []byte(out), 0o644)
	s := launch(t, port, "run", "--config", path)
	s.waitReady(t)
	equal(t, "served by the printed config", s.get(t, "/raw/hello").body, "hello world")
}

func TestCoreBundler(t *testing.T) {
	// The lock is made from the gems this machine has, as an app's is.
	dir := copyTree(t, app("bundled"))
	lock := exec.Command("bundle", "lock", "--local")
	lock.Dir = dir
	if out, err := lock.CombinedOutput(); err != nil {
		t.Fatalf("bundle lock --local: %v\n%s", err, out)
	}
	s := start(t, filepath.Join(dir, "config.ru"))
	r := s.get(t, "/")
	equal(t, "status", r.status, 200)
	if !strings.HasPrefix(r.body, "bundler=Gemfile ") || !strings.Contains(r.body, "rack") {
		t.Fatalf("Bundler was not set up from the Gemfile beside the rackup: %q", r.body)
	}
}

func TestCoreAccessLogAndDeepStacks(t *testing.T) {
	s := start(t, "--access-log", app("core.ru"))
	equal(t, "a deep stack in a request fiber", s.get(t, "/deep?depth=1000").body, "1000")
	eventually(t, 5*time.Second, "an access log line", func() bool {
		out := s.stdout.String()
		return strings.Contains(out, `"logger":"http.log.access`) && strings.Contains(out, `"uri":"/deep?depth=1000"`)
	})
}
