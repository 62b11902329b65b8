package test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Go's processors follow the load (procs.go): after a run of requests one
// at a time GOMAXPROCS is 1, the first request that finds another in
// flight gives the rest back, and a run one at a time lowers it again.
// Every answer is whole throughout, with 100 clients at once arriving
// while it is 1 and some of them leaving before their answers.
func TestProcsByLoad(t *testing.T) {
	need(t, runtime.NumCPU() >= 2, "2 CPUs or more: with one, Go's processors have nothing to lower")
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("edges.ru"))
	procs := func() int {
		n, err := strconv.Atoi(metricValue(t, admin, "ruvoy_go_processors"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	full := procs()
	if full < 2 {
		t.Fatalf("ruvoy_go_processors %d at rest on %d CPUs", full, runtime.NumCPU())
	}
	lone := func() {
		for i := 0; i < 20; i++ {
			equal(t, "GET /x", s.get(t, "/x").body, "hello /x")
		}
	}
	lone()
	equal(t, "processors after requests one at a time", procs(), 1)

	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			if i%10 == 0 { // leaves before its answer
				c := dialRaw(t, s.addr)
				c.Write([]byte("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"))
				c.Close()
				return
			}
			path := "/c" + strconv.Itoa(i)
			r := s.get(t, path)
			equal(t, "GET "+path, r.status, 200)
			equal(t, "GET "+path, r.body, "hello "+path)
		}()
	}
	wg.Wait()
	equal(t, "processors after 100 clients at once", procs(), full)

	// The clients that left have their /slow run out in Ruby first.
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, admin, "ruvoy_requests_in_flight") != "0"; {
		if time.Now().After(deadline) {
			t.Fatalf("requests still in flight: %s", metricValue(t, admin, "ruvoy_requests_in_flight"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	lone()
	equal(t, "processors one at a time again", procs(), 1)
	if n, _ := strconv.Atoi(metricValue(t, admin, "ruvoy_go_processors_changes_total")); n < 3 {
		t.Errorf("ruvoy_go_processors_changes_total %d, want at least 3", n)
	}
}

// A file --static sends is work the app's requests do not count: it gives
// Go's processors back at once.
func TestProcsByLoadStatic(t *testing.T) {
	need(t, runtime.NumCPU() >= 2, "2 CPUs or more: with one, Go's processors have nothing to lower")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "robots.txt"), []byte("User-agent: *\n"), 0o644)
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, "--static", dir, app("edges.ru"))
	full := metricValue(t, admin, "ruvoy_go_processors")
	for i := 0; i < 20; i++ {
		equal(t, "GET /x", s.get(t, "/x").body, "hello /x")
	}
	equal(t, "processors after requests one at a time", metricValue(t, admin, "ruvoy_go_processors"), "1")
	r := s.get(t, "/robots.txt")
	equal(t, "static file", r.body, "User-agent: *\n")
	equal(t, "processors after a static file", metricValue(t, admin, "ruvoy_go_processors"), full)
}

// Off when RUVOY_PROCS_BY_LOAD=0 and when GOMAXPROCS is set: requests one
// at a time leave Go's processors as they were.
func TestProcsByLoadOff(t *testing.T) {
	need(t, runtime.NumCPU() >= 2, "2 CPUs or more: with one, Go's processors have nothing to lower")
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"RUVOY_PROCS_BY_LOAD=0", []string{"RUVOY_PROCS_BY_LOAD=0"}, nil},
		{"GOMAXPROCS=2", []string{"GOMAXPROCS=2"}, nil},
	} {
		adminPort, port := freePort(t), freePort(t)
		args := append([]string{"-p", port, "--admin-port", adminPort}, c.args...)
		s := launchIn(t, "", c.env, port, append(args, app("edges.ru"))...)
		s.waitReady(t)
		admin := "http://127.0.0.1:" + adminPort
		before := metricValue(t, admin, "ruvoy_go_processors")
		if c.name == "GOMAXPROCS=2" {
			equal(t, c.name+": processors at rest", before, "2")
		} else if before == "1" {
			t.Fatalf("%s: one processor at rest on %d CPUs", c.name, runtime.NumCPU())
		}
		for i := 0; i < 20; i++ {
			equal(t, c.name+": GET /x", s.get(t, "/x").body, "hello /x")
		}
		equal(t, c.name+": processors", metricValue(t, admin, "ruvoy_go_processors"), before)
		equal(t, c.name+": changes", metricValue(t, admin, "ruvoy_go_processors_changes_total"), "0")
	}
}
