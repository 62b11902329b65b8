package test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The restart in docs/deployment.md: a second ruvoy binds the port the
// first serves (SO_REUSEPORT), and the first drains after SIGTERM: no
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
	next := launch(t, port, "-p", port, app("reload_v2.ru"))
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
