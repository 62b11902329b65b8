package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Requests one at a time: after a run of them each handler waits for the
// VM's answer on its own thread (direct.go, rv_direct.c) instead of through
// the dispatcher. Every kind of answer arrives as it does through the
// dispatcher, byte for byte: one message, many messages under the window,
// an answer that outlasts the wait (the rest through the dispatcher), a body
// cut short, a client that leaves; then many requests at once, then one at a
// time again.
func TestDirectOneAtATime(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("streaming.ru"))
	const size = 1<<20 + 3
	whole, err := exec.Command("ruby", "-e", fmt.Sprintf("print Random.new(%d).bytes(%d)", size, size)).Output()
	if err != nil {
		t.Fatal(err)
	}
	direct := func() int {
		n, err := strconv.Atoi(metricValue(t, admin, "ruvoy_requests_direct_total"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ping := func() {
		r := s.get(t, "/ping")
		equal(t, "GET /ping", r.status, 200)
		equal(t, "GET /ping", r.body, "pong")
	}
	for i := 0; i < 20; i++ {
		ping()
	}
	before := direct()
	if before == 0 {
		t.Fatal("20 requests one after another and none answered directly")
	}

	const rounds = 4
	for i := 0; i < rounds; i++ {
		ping()
		res, err := client.Get(fmt.Sprintf("%s/whole?bytes=%d", s.url, size))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || !bytes.Equal(got, whole) {
			t.Fatalf("GET /whole: %d bytes (%v), want the %d bytes of Random.new(%d)", len(got), err, size, size)
		}
		r := s.get(t, "/ttfb") // "a", half a second, "b": longer than the wait
		equal(t, "GET /ttfb", r.body, "ab")
		res, err = client.Get(s.url + "/cut")
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil || string(got) != "part" {
			t.Fatalf("GET /cut: %q, %v; want \"part\" then an error", got, err)
		}
		r = s.get(t, "/nowhere")
		equal(t, "GET /nowhere", r.status, 404)
		equal(t, "GET /nowhere", r.body, "not found")
	}
	if got := direct() - before; got < rounds*5/2 {
		t.Fatalf("%d of %d requests one at a time answered directly", got, rounds*5)
	}

	// Clients that leave while their request, alone, still sends (a
	// failed write tells them apart from a half-close).
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/big?mb=100&name=gone", nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, res.Body, int64(1+i)*100_000); err != nil {
			t.Fatal(err)
		}
		cancel()
		res.Body.Close()
	}
	eventually(t, 10*time.Second, "every left request's body closed", func() bool {
		st := s.appStats(t)
		return st["gone.closed"] == 10 && st["live"] == 1
	})

	// Many at once (the dispatcher's way), then one at a time again.
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.get(t, "/ping")
			if r.status != 200 || r.body != "pong" {
				t.Errorf("GET /ping among 100: %d %q", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	mid := direct()
	for i := 0; i < 20; i++ {
		ping()
	}
	if direct() == mid {
		t.Fatal("after many requests at once, requests one at a time were no longer answered directly")
	}
	eventually(t, 5*time.Second, "no request in flight", func() bool {
		return metricValue(t, admin, "ruvoy_requests_in_flight") == "0"
	})
}

// With RUVOY_DIRECT=0 no handler waits on its own thread, and the answers
// are the same.
func TestDirectOff(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	port := freePort(t)
	s := launchIn(t, "", []string{"RUVOY_DIRECT=0"}, port, "-p", port, "--admin-port", adminPort, app("streaming.ru"))
	s.waitReady(t)
	for i := 0; i < 30; i++ {
		r := s.get(t, "/ping")
		equal(t, "GET /ping", r.body, "pong")
	}
	equal(t, "requests answered directly", metricValue(t, admin, "ruvoy_requests_direct_total"), "0")
}
