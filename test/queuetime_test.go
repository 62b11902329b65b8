package test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// queued is what apps/queue.ru answers: X-Request-Start as the app saw it,
// and when it was called.
type queued struct {
	Start    string `json:"start"`
	CalledUS int64  `json:"called_us"`
	Pid      int    `json:"pid"`
}

// wait is how long the request waited by the app's reckoning: from its
// X-Request-Start (t=microseconds) to the app's call.
func (q queued) wait(t testing.TB) time.Duration {
	t.Helper()
	us, err := strconv.ParseInt(strings.TrimPrefix(q.Start, "t="), 10, 64)
	if err != nil || !strings.HasPrefix(q.Start, "t=") {
		t.Fatalf("X-Request-Start %q: want t=<microseconds since the epoch>", q.Start)
	}
	return time.Duration(q.CalledUS-us) * time.Microsecond
}

func getQueued(t testing.TB, url string, header http.Header) queued {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var q queued
	if err := json.NewDecoder(res.Body).Decode(&q); err != nil || res.StatusCode != 200 {
		t.Fatalf("%s: %d %v", url, res.StatusCode, err)
	}
	return q
}

// Requests that wait for a place (--max-requests 1, and a queue timeout)
// see their wait in X-Request-Start, as an APM agent reads it, and the
// server counts it in ruvoy_request_queue_seconds (and each worker's, in
// cluster mode): with five requests of 200 ms in line, the last waits
// about 800 ms, and the histogram holds every one. A client's own
// X-Request-Start is replaced: a client is no load balancer.
func TestOverloadQueueTime(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		adminPort := freePort(t)
		admin := "http://127.0.0.1:" + adminPort
		args := []string{"--admin-port", adminPort, "--max-requests", "1", "--queue-timeout", "20000"}
		if workers > 0 {
			args = append(args, "-w", strconv.Itoa(workers))
		}
		s := start(t, append(args, app("queue.ru"))...)

		before := time.Now()
		lied := getQueued(t, s.url+"/", http.Header{"X-Request-Start": {"t=1"}})
		if w := lied.wait(t); w < 0 || w > 5*time.Second {
			t.Fatalf("a client's X-Request-Start was kept: %q (waited %v)", lied.Start, w)
		}
		if us, _ := strconv.ParseInt(strings.TrimPrefix(lied.Start, "t="), 10, 64); us < before.Add(-time.Second).UnixMicro() {
			t.Fatalf("X-Request-Start %q is older than the request", lied.Start)
		}

		const n = 5
		var mu sync.Mutex
		var waits []time.Duration
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := getQueued(inGoroutine(t), s.url+"/?s=0.2", nil)
				mu.Lock()
				waits = append(waits, q.wait(t))
				mu.Unlock()
			}()
		}
		wg.Wait()
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		t.Logf("waits seen by the app: %v", waits)
		if len(waits) != n || waits[n-1] < 600*time.Millisecond || waits[n-1] > 30*time.Second {
			t.Fatalf("the last of %d requests in line waited %v by its X-Request-Start, want 800 ms or so", n, waits)
		}
		count, sum := metricNumber(t, admin, "ruvoy_request_queue_seconds_count"), metricNumber(t, admin, "ruvoy_request_queue_seconds_sum")
		if count != n+1 || sum < 1.2 {
			t.Fatalf("ruvoy_request_queue_seconds: count %v sum %v, want %d requests waiting 2 s or so in all", count, sum, n+1)
		}
		if inf := metricNumber(t, admin, `ruvoy_request_queue_seconds_bucket{le="+Inf"}`); inf != count {
			t.Fatalf("+Inf bucket %v, count %v", inf, count)
		}
		if workers > 0 {
			if c := metricNumber(t, admin, `ruvoy_worker_request_queue_seconds_count{worker="0"}`); c != count {
				t.Fatalf("the worker's queue time count %v, the server's %v", c, count)
			}
		}
	})
}

// Behind a trusted proxy the proxy's X-Request-Start is the app's: the
// wait began there.
func TestOverloadQueueTimeFromProxy(t *testing.T) {
	s := start(t, "--trusted-proxies", "127.0.0.1/32", app("queue.ru"))
	const proxied = "t=1700000000000000"
	if q := getQueued(t, s.url+"/", http.Header{"X-Request-Start": {proxied}}); q.Start != proxied {
		t.Fatalf("X-Request-Start %q from a trusted proxy, want %q kept", q.Start, proxied)
	}
	q := getQueued(t, s.url+"/", nil)
	if w := q.wait(t); w < 0 || w > 5*time.Second {
		t.Fatalf("with no X-Request-Start from the proxy, the server's own: %q (%v)", q.Start, w)
	}
}

// The access log (Caddy's JSON) names each request's queue time.
func TestCoreAccessLogQueueTime(t *testing.T) {
	s := start(t, "--access-log-format", "json", app("queue.ru"))
	getQueued(t, s.url+"/?s=0", nil)
	eventually(t, 10*time.Second, "an access log entry", func() bool {
		return strings.Contains(s.stdout.String(), `"queue_time":`)
	})
	for _, line := range strings.Split(s.stdout.String(), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e["queue_time"] == nil {
			continue
		}
		if v, ok := e["queue_time"].(float64); !ok || v < 0 || v > 5 {
			t.Fatalf("queue_time %v in %s", e["queue_time"], line)
		}
		return
	}
	t.Fatalf("no queue_time in the access log:\n%s", s.stdout.String())
}
