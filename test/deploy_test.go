package test

import (
	"bufio"
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

// The restart in docs/deployment.md: a second ruvoy binds the port the
// first serves (--reuse-port), and the first drains after SIGTERM: no
// request fails while one process hands over to the other.
func TestDeployOverlappingRestart(t *testing.T) {
	// Without it, connections queued on the old listener when it closes
	// are reset (1 run in 8 lost a request here).
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req"); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("net.ipv4.tcp_migrate_req is not 1 (%q, %v): docs/deployment.md; build/setup-debian.sh test sets it", b, err)
	}
	port := freePort(t)
	old := launch(t, port, "-p", port, app("reload_v1.ru"))
	old.waitReady(t)

	var stop atomic.Bool
	var ok, failed atomic.Int64
	seen := sync.Map{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			for !stop.Load() {
				res, err := c.Get(old.url + "/")
				if err != nil {
					failed.Add(1)
					t.Logf("failed: %v", err)
					continue
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				seen.Store(string(b), true)
				ok.Add(1)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	next := launch(t, port, "-p", port, "--reuse-port", app("reload_v2.ru"))
	// Ready when it has printed its banner: it listens on the shared port.
	eventually(t, 60*time.Second, "the new process serving", func() bool { return len(next.stdout.String()) > 0 })
	time.Sleep(300 * time.Millisecond)
	equal(t, "the old process's exit code", old.stop(), 0)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	equal(t, "failed requests", failed.Load(), int64(0))
	_, v1 := seen.Load("v1")
	_, v2 := seen.Load("v2")
	if !v1 || !v2 {
		t.Fatalf("answers from both processes expected (v1 %v, v2 %v)", v1, v2)
	}
	t.Logf("%d requests, none failed", ok.Load())
}

// Go's HTTP/1 server, once its shutdown has begun, closes unanswered a
// connection whose request head it reads afterwards, even one it accepted
// before (caddy/drain.go). Here two connections accepted before SIGTERM send
// their requests after it, one having sent nothing before, one half its
// head: both are answered, then the process exits. Under `ruvoy config.ru`
// and under a Caddyfile that lists the wrapper.
func TestDeployStopAnswersAcceptedConnections(t *testing.T) {
	t.Run("ruvoy config.ru", func(t *testing.T) {
		stopAnswersAcceptedConnections(t, start(t, app("core.ru")))
	})
	t.Run("Caddyfile", func(t *testing.T) {
		s := startCaddyfile(t, `servers {
		listener_wrappers {
			ruvoy_drain
		}
	}`)
		stopAnswersAcceptedConnections(t, s)
	})
}

func stopAnswersAcceptedConnections(t *testing.T, s *server) {
	silent, half := dialRaw(t, s.addr), dialRaw(t, s.addr)
	io.WriteString(half, "GET /sleep?s=0.2 HTTP/1.1\r\nHost: ruvoy.test\r\n")
	time.Sleep(200 * time.Millisecond) // both accepted
	s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond) // the server is stopping
	io.WriteString(silent, "GET /sleep?s=0.2 HTTP/1.1\r\nHost: ruvoy.test\r\nConnection: close\r\n\r\n")
	io.WriteString(half, "Connection: close\r\n\r\n")
	equal(t, "the silent connection's answer", readAnswer(t, silent), "200 slept")
	equal(t, "the half-sent connection's answer", readAnswer(t, half), "200 slept")
	equal(t, "exit code", s.wait(t, 20*time.Second), 0)
}

// The same on a config reload: a connection the old server accepted, whose
// request head is complete only once the new config serves, is answered by
// the old app.
func TestDeployReloadAnswersAcceptedConnections(t *testing.T) {
	adminPort := freePort(t)
	s := start(t, "--admin-port", adminPort, app("reload_v1.ru"))
	half := dialRaw(t, s.addr)
	io.WriteString(half, "GET / HTTP/1.1\r\nHost: ruvoy.test\r\n")
	time.Sleep(200 * time.Millisecond) // accepted by the old server
	reloaded := make(chan string, 1)
	go func() {
		admin := "http://127.0.0.1:" + adminPort
		res, err := adminDo("GET", admin+"/config/", nil)
		if err == nil {
			cfg, _ := io.ReadAll(res.Body)
			res.Body.Close()
			newCfg := strings.Replace(string(cfg), "reload_v1.ru", "reload_v2.ru", 1)
			res, err = adminDo("POST", admin+"/load", strings.NewReader(newCfg))
		}
		if err != nil {
			reloaded <- err.Error()
			return
		}
		res.Body.Close()
		reloaded <- res.Status
	}()
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, 60*time.Second, "the new config serving", func() bool {
		res, err := fresh.Get(s.url + "/")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(b) == "v2"
	})
	time.Sleep(100 * time.Millisecond) // the old server is stopping
	io.WriteString(half, "Connection: close\r\n\r\n")
	equal(t, "the old server's connection's answer", readAnswer(t, half), "200 v1")
	equal(t, "POST /load", <-reloaded, "200 OK")
}

func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswer reads one response from c, which the server then closes, as
// "STATUS BODY", or the error that cut it short.
func readAnswer(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "no answer: " + err.Error()
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return fmt.Sprintf("%d %s, cut short: %v", res.StatusCode, b, err)
	}
	return fmt.Sprintf("%d %s", res.StatusCode, b)
}

// --health-path: a balancer's probe on the serving port, answered from Go
// (the app never sees it): 200 while serving; on SIGTERM 503 for the drain
// delay while every other request, on new connections too, is still
// served; then the usual stop, exit 0. The same from a Caddyfile
// (ruvoy_health, ruvoy_drain's delay), and in cluster mode.
func TestDeployHealthPath(t *testing.T) {
	t.Run("ruvoy config.ru", func(t *testing.T) {
		healthPathDrains(t, start(t, "--health-path", "/up", "--drain-delay", "2", app("core.ru")))
	})
	t.Run("cluster", func(t *testing.T) {
		s := start(t, "--health-path", "/up", "--drain-delay", "2", "-w", "1", app("core.ru"))
		// A worker that stops reporting (2 s silent) takes the host out.
		worker := workerPids(t, s)[0]
		syscall.Kill(worker, syscall.SIGSTOP)
		eventually(t, 10*time.Second, "GET /up answering 503 while the only worker is stopped", func() bool {
			return s.get(t, "/up").status == 503
		})
		mustContain(t, "GET /up while the only worker is stopped", s.get(t, "/up").body, "no worker serves")
		syscall.Kill(worker, syscall.SIGCONT)
		eventually(t, 10*time.Second, "GET /up answering 200 once it reports again", func() bool {
			return s.get(t, "/up").status == 200
		})
		healthPathDrains(t, s)
	})
	t.Run("Caddyfile", func(t *testing.T) {
		port := freePort(t)
		path, _ := filepath.Abs(app("core.ru"))
		s, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	servers {
		listener_wrappers {
			ruvoy_drain {
				delay 2s
			}
		}
	}
}
http://:%s {
	bind 127.0.0.1
	ruvoy_health /up
	ruvoy * %s
}
`, port, path))
		healthPathDrains(t, s)
	})
}

func healthPathDrains(t *testing.T, s *server) {
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	probe := func() (int, string) {
		res, err := fresh.Get(s.url + "/up")
		if err != nil {
			t.Fatalf("GET /up: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, "the probe's Cache-Control", res.Header.Get("Cache-Control"), "no-store")
		return res.StatusCode, string(b)
	}
	code, body := probe()
	equal(t, "GET /up while serving", fmt.Sprint(code, " ", body), "200 ok\n")
	head := s.do(t, "HEAD", "/up", nil)
	equal(t, "HEAD /up", fmt.Sprint(head.status, " ", head.body), "200 ")
	// core.ru answers any other path itself.
	equal(t, "GET /upx reaches the app", s.get(t, "/upx").status, 404)

	stopped := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, 1500*time.Millisecond, "GET /up answering 503 after SIGTERM", func() bool {
		code, _ := probe()
		return code == 503
	})
	_, body = probe()
	equal(t, "GET /up while draining", body, "draining: the server is stopping\n")
	// Within the delay, requests on new connections are served.
	for time.Since(stopped) < 1500*time.Millisecond {
		res, err := fresh.Get(s.url + "/sleep?s=0.05")
		if err != nil {
			t.Fatalf("a request %v after SIGTERM, within the drain delay: %v", time.Since(stopped).Round(time.Millisecond), err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, "a request within the drain delay", fmt.Sprint(res.StatusCode, " ", string(b)), "200 slept")
	}
	equal(t, "exit code", s.wait(t, 30*time.Second), 0)
	if d := time.Since(stopped); d < 2*time.Second {
		t.Errorf("stopped %v after SIGTERM, within the drain delay of 2s", d)
	}
}

// --health-path before the app has booted, after a hold, and
// --drain-delay's default: /up never answers 200 before the app has booted
// (the port opens only once it has, so a balancer meets refused
// connections, not a 503); it answers 503 once Ruby code has held the VM
// thread for 30 s (a blocking C call here), 200 again once it lets go; and
// on SIGTERM without --drain-delay, 5 s of draining, /up 503 and every
// other request served, before the stop. About 45 s, waiting: it runs
// beside the other such tests (t.Parallel).
func TestDeployHealthPathBootHoldAndDrainDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slowBoot, booted := filepath.Join(dir, "slow"), filepath.Join(dir, "booted")
	os.WriteFile(slowBoot, nil, 0o644)
	port := freePort(t)
	s := launchIn(t, "", []string{"CLUSTER_BOOT_SLOW=" + slowBoot, "CLUSTER_BOOT_LOG=" + booted}, port,
		"-p", port, "--health-path", "/up", app("cluster.ru"))
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	probe := func() string {
		t.Helper()
		return statusAndBodyWith(fresh, s.url+"/up")
	}
	var before []string // what /up answered meanwhile, each once
	bootedAt200 := false
	eventually(t, 60*time.Second, "GET /up answering 200 once the app has booted", func() bool {
		p := probe()
		if _, err := os.Stat(booted); p == "200 ok\n" {
			bootedAt200 = err == nil
			return true
		}
		if len(before) == 0 || before[len(before)-1] != p {
			before = append(before, p)
		}
		return false
	})
	if !bootedAt200 {
		t.Fatalf("GET /up answered 200 before the app had booted (the app, sleeping 3 s, had not written %s)", booted)
	}
	t.Logf("GET /up before the app had booted: %q", before)
	for _, p := range before {
		if !strings.Contains(p, "connection refused") && !strings.HasPrefix(p, "503 ") {
			t.Errorf("GET /up before the app had booted: %q", p)
		}
	}

	held := time.Now()
	blocked := background(t, func(t testing.TB) response { return s.get(t, "/block?s=34") })
	time.Sleep(2 * time.Second)
	equal(t, "GET /up 2 s into a hold", probe(), "200 ok\n")
	eventually(t, 45*time.Second, "GET /up answering 503 once the VM thread has been held 30 s", func() bool {
		return strings.HasPrefix(probe(), "503 unhealthy: Ruby code has held the VM thread for ")
	})
	if d := time.Since(held); d < 30*time.Second {
		t.Errorf("GET /up said unhealthy %v into the hold, before 30 s", d.Round(time.Millisecond))
	}
	equal(t, "the request that held it", (<-blocked).status, 200)
	eventually(t, 10*time.Second, "GET /up answering 200 once the VM thread is let go", func() bool { return probe() == "200 ok\n" })

	stopped := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, 1500*time.Millisecond, "GET /up answering 503 after SIGTERM", func() bool {
		return probe() == "503 draining: the server is stopping\n"
	})
	for time.Since(stopped) < 4*time.Second {
		equal(t, "a request within the default drain delay", statusAndBodyWith(fresh, s.url+"/pid"), fmt.Sprint("200 ", s.cmd.Process.Pid))
		time.Sleep(100 * time.Millisecond)
	}
	equal(t, "exit code", s.wait(t, 30*time.Second), 0)
	if d := time.Since(stopped); d < 5*time.Second {
		t.Errorf("stopped %v after SIGTERM, within the default drain delay of 5 s", d.Round(time.Millisecond))
	}
}
