package test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// concurrently sends n GETs at once and returns how long all took; every
// answer must be a 200 with the wanted body.
func concurrently(t *testing.T, s *server, n int, path, want string) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	began := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			r := s.get(t, path)
			if r.status != 200 || r.body != want {
				errs <- r.body
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for e := range errs {
		t.Fatalf("GET %s: want %q, got %q", path, want, e)
	}
	return took
}

// Waits of every kind overlap across requests: 100 requests that each wait
// 0.2 s take about 0.2 s in all, not 20 s.
func TestCoreWaitsOverlap(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		w.Write([]byte("slow answer"))
	}))
	defer slow.Close()

	s := start(t, app("core.ru"))
	cases := []struct {
		name, path, want string
		n                int
		within           time.Duration
	}{
		{"sleep", "/sleep?s=0.2", "slept", 100, 1500 * time.Millisecond},
		{"IO.pipe", "/pipe", "piped", 100, 1500 * time.Millisecond},
		{"Net::HTTP", "/http?url=" + url.QueryEscape(slow.URL), "slow answer", 100, 1500 * time.Millisecond},
		{"Queue, Mutex, ConditionVariable", "/queue", "queued signalled", 100, 1500 * time.Millisecond},
		{"Thread#value", "/thread", "from thread", 50, 1500 * time.Millisecond},
		// spawn itself (fork and exec) holds the VM thread, tens of ms
		// each on a busy machine; serial waits would take 4 s
		{"Process.wait", "/spawn", "exit 0", 20, 3 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.get(t, c.path) // warm up: first calls load code
			took := concurrently(t, s, c.n, c.path, c.want)
			t.Logf("%d concurrent %s: %v", c.n, c.path, took)
			if took > c.within {
				t.Fatalf("%d concurrent %s took %v, want under %v: the waits did not overlap", c.n, c.path, took, c.within)
			}
		})
	}
}

func TestCoreTimeoutAndDNS(t *testing.T) {
	s := start(t, app("core.ru"))
	began := time.Now()
	r := s.get(t, "/timeout")
	equal(t, "Timeout.timeout", r.body, "timed out")
	if took := time.Since(began); took > time.Second {
		t.Fatalf("Timeout.timeout(0.05) took %v", took)
	}
	r = s.get(t, "/dns")
	equal(t, "status", r.status, 200)
	if r.body != "127.0.0.1" && r.body != "127.0.0.1,::1" && r.body != "::1,127.0.0.1" {
		t.Fatalf("resolving localhost gave %q", r.body)
	}
}

// Request fibers are reused (rv_fiber_pool.c), yet each request starts with
// no fiber-locals: 5 waves of 50 concurrent requests that each set one.
func TestCoreFiberLocalsDoNotLeak(t *testing.T) {
	s := start(t, app("core.ru"))
	var mu sync.Mutex
	fibers := map[string]int{}
	for wave := 0; wave < 5; wave++ {
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				t := inGoroutine(t)
				r := s.get(t, fmt.Sprintf("/fiber-local?%d-%d", wave, i))
				was, fiber, ok := strings.Cut(r.body, " fiber=")
				if r.status != 200 || !ok || was != "was=nil" {
					t.Errorf("request %d-%d: %d %q: a fiber-local from an earlier request leaked", wave, i, r.status, r.body)
					return
				}
				mu.Lock()
				fibers[fiber]++
				mu.Unlock()
			}(i)
		}
		wg.Wait()
	}
	// Fibers were reused, so the check above saw reused ones.
	if len(fibers) >= 250 {
		t.Fatalf("250 requests ran on %d fibers: none was reused", len(fibers))
	}
	t.Logf("250 requests ran on %d fibers", len(fibers))
}
