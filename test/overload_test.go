package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// burst sends n concurrent GETs and counts answers by status.
func burst(t *testing.T, s *server, n int, path string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			r := s.get(t, path)
			if r.status == 503 && r.header.Get("Retry-After") == "" {
				t.Errorf("a 503 without Retry-After")
			}
			mu.Lock()
			counts[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return counts
}

func metricValue(t testing.TB, admin, name string) string {
	t.Helper()
	return metricValues(t, admin, name)[0]
}

// metricValues are metrics' values from one scrape, in the order named.
func metricValues(t testing.TB, admin string, names ...string) []string {
	t.Helper()
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	values := make([]string, len(names))
	for i, name := range names {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				values[i] = v
				break
			}
		}
		if values[i] == "" {
			t.Fatalf("no metric %s in:\n%s", name, b)
		}
	}
	return values
}

func TestOverloadRequestCount(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, "--max-requests", "5", app("core.ru"))
	before := metricValue(t, admin, "ruvoy_requests_admitted_total")
	counts := burst(t, s, 20, "/sleep?s=0.5")
	equal(t, "200s", counts[200], 5)
	equal(t, "503s", counts[503], 15)
	equal(t, "admitted before", before, "0")
	equal(t, "admitted", metricValue(t, admin, "ruvoy_requests_admitted_total"), "5")
	equal(t, "rejected", metricValue(t, admin, `ruvoy_requests_rejected_total{reason="max_requests"}`), "15")
}

func TestOverloadQueueTimeout(t *testing.T) {
	s := start(t, "--max-requests", "2", "--queue-timeout", "2000", app("core.ru"))
	counts := burst(t, s, 6, "/sleep?s=0.3")
	equal(t, "200s when the queue timeout covers the wait", counts[200], 6)

	s = start(t, "--max-requests", "2", "--queue-timeout", "100", app("core.ru"))
	began := time.Now()
	counts = burst(t, s, 4, "/sleep?s=1")
	equal(t, "200s", counts[200], 2)
	equal(t, "503s after the queue timeout", counts[503], 2)
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
}

// A request that leaves while queued costs nothing in Ruby. Over HTTP/1.1
// its leaving shows within probeDelay plus a round trip (vanish.go).
func TestOverloadCancelledWhileQueued(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, "--max-requests", "1", "--queue-timeout", "10000", app("core.ru"))
	first := make(chan struct{})
	go func() { defer close(first); s.get(inGoroutine(t), "/sleep?s=1") }()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/sleep?s=0", nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("the queued request should have been cancelled")
	}
	eventually(t, 2*time.Second, "the queue empty after the client left", func() bool {
		return metricValue(t, admin, "ruvoy_requests_queued") == "0"
	})
	<-first
	equal(t, "admitted", metricValue(t, admin, "ruvoy_requests_admitted_total"), "1")
}

// Uploads get 503 before their body is read while the body budget is full:
// each request with a body holds its working set (128 KiB) and the bytes
// it holds.
func TestOverloadBodyBudget(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, "--max-inflight-body-bytes", "1048576", app("streaming.ru"))
	var conns []net.Conn
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /upload?pause=0.1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
		conns = append(conns, c)
	}
	held := func() float64 {
		v, _ := strconv.ParseFloat(metricValue(t, admin, "ruvoy_request_body_bytes_held"), 64)
		return v
	}
	eventually(t, 5*time.Second, "eight uploads admitted", func() bool { return held() == 1048576 })
	// The ninth gets its answer without sending a byte of its body.
	r := s.rawRequest(t, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
	equal(t, "status", r.status, 503)
	equal(t, "rejected", metricValue(t, admin, `ruvoy_requests_rejected_total{reason="body_budget"}`), "1")
	// Once one ends, a small body fits.
	conns[0].Close()
	eventually(t, 5*time.Second, "one upload's share released", func() bool { return held() == 917504 })
	equal(t, "small upload", s.do(t, "POST", "/read-all", strings.NewReader("tiny")).body, "4")
	for _, c := range conns {
		c.Close()
	}
	eventually(t, 5*time.Second, "the budget released", func() bool { return held() == 0 })
}

func TestOverloadProbes(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("core.ru"))
	get := func(path string) (int, string) {
		res, err := http.Get(admin + path)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("/ruvoy/ready")
	equal(t, "ready "+body, code, 200)
	code, body = get("/ruvoy/health")
	equal(t, "health "+body, code, 200)
	for _, name := range []string{"ruvoy_vm_busy_seconds_total", "ruvoy_vm_loop_lag_seconds",
		"ruvoy_fibers_requests", "ruvoy_ruby_gc_total", "ruvoy_ruby_heap_live_slots",
		"ruvoy_response_body_bytes_in_flight", "ruvoy_requests_in_flight"} {
		metricValue(t, admin, name)
	}

	// Draining: the admin API says not ready while the request in flight
	// at SIGTERM finishes (a refused connection would not be an answer).
	inFlight := background(t, func(t testing.TB) response { return s.get(t, "/sleep?s=2") })
	time.Sleep(200 * time.Millisecond)
	s.cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, 1500*time.Millisecond, "/ruvoy/ready answering 503 while draining", func() bool {
		code, _ := get("/ruvoy/ready")
		return code == 503
	})
	code, body = get("/ruvoy/ready")
	equal(t, "ready while draining", fmt.Sprint(code, " ", body), "503 draining: the server is stopping\n")
	r := <-inFlight
	equal(t, "the request in flight at SIGTERM", fmt.Sprint(r.status, " ", r.body), "200 slept")
	equal(t, "exit code", s.wait(t, 20*time.Second), 0)
}

// ruvoy_ruby_gc_seconds_total is the time Ruby spent in its collector, not
// the process's CPU time meanwhile: Go threads busy on other cores while the
// VM collects must not count (Ruby 3.1's GC.stat(:time) counts them).
func TestOverloadGCTime(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("core.ru"))
	gcSeconds := func() float64 {
		v, err := strconv.ParseFloat(metricValue(t, admin, "ruvoy_ruby_gc_seconds_total"), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := gcSeconds()
	// Keep Go busy with requests it answers without Ruby.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res, err := http.Get(admin + "/ruvoy/health"); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	r := s.get(t, "/gc?s=1")
	close(stop)
	wg.Wait()
	equal(t, "status", r.status, 200)
	wall, err := strconv.ParseFloat(r.body, 64)
	if err != nil {
		t.Fatal(err)
	}
	spent := gcSeconds() - before
	if spent < wall/2 || spent > wall+0.05 {
		t.Fatalf("GC ran for most of %.3f s of wall time; the metric grew by %.3f s", wall, spent)
	}
}

// A request that arrives while many fibers are ready does not wait for all
// of them: the event loop's turn ends early when messages wait
// (rv_loop.c's TURN_NS). 40 requests work in slices of 2 ms, all ready at
// once; one of them sends a request to the server from inside its slice,
// which records how many slices ran before it started. Before, it waited
// for the rest of the turn: up to 39 slices, about half of them at the
// median. Counted in slices, so a busy machine makes the test no looser.
func TestOverloadTurnIsBounded(t *testing.T) {
	const spinners = 40
	s := start(t, app("turns.ru"))
	equal(t, "connect", s.get(t, "/connect").status, 200)
	var wg sync.WaitGroup
	for i := 0; i < spinners; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			if r := s.get(t, "/spin?"+strconv.Itoa(spinners)); r.status != 200 {
				t.Errorf("spin: status %d", r.status)
			}
		}()
	}
	wg.Wait()
	var waited []int
	if err := json.Unmarshal([]byte(s.get(t, "/waited").body), &waited); err != nil || len(waited) < 15 {
		t.Fatalf("slices waited by the probes: %v (%v); want 15", waited, err)
	}
	sort.Ints(waited)
	t.Logf("slices the probes waited, sorted: %v", waited)
	if median := waited[len(waited)/2]; median >= spinners/4 {
		t.Errorf("a request sent while %d fibers were ready waited %d of their slices at the median (all: %v); want under %d",
			spinners, median, waited, spinners/4)
	}
}
