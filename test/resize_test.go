package test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// SIGTTIN adds a worker and SIGTTOU retires one, as under Puma, while
// clients keep asking: every request answers 200 (a retiring worker
// finishes its requests), the workers metric and /up follow, and the
// pool never goes below one worker. With workers started anew and forked
// from a template.
func TestClusterResizeBySignal(t *testing.T) {
	for _, mode := range [][]string{nil, {"--preload"}} {
		t.Run(modeName(append([]string{"-w", "2"}, mode...)), func(t *testing.T) {
			adminPort := freePort(t)
			admin := "http://127.0.0.1:" + adminPort
			s := start(t, append([]string{"-w", "2", "--admin-port", adminPort, "--health-path", "/up", app("cluster.ru")}, mode...)...)
			workers := func() int { return int(metricNumber(t, admin, "ruvoy_workers")) }
			equal(t, "workers at start", workers(), 2)

			// Load meanwhile: requests that take a while, so a retiring
			// worker has some in flight.
			var stop atomic.Bool
			var ok, failed atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t := inGoroutine(t)
					for !stop.Load() {
						if r := s.get(t, "/sleep?s=0.05"); r.status == 200 {
							ok.Add(1)
						} else {
							failed.Add(1)
							t.Errorf("under load: %d %q", r.status, r.body)
						}
					}
				}()
			}
			signal := func(sig syscall.Signal, want int) {
				t.Helper()
				if err := s.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				eventually(t, 60*time.Second, sig.String()+": "+strconv.Itoa(want)+" workers", func() bool { return workers() == want })
				equal(t, "/up", s.get(t, "/up").status, 200)
				if st := procState(s.cmd.Process.Pid); st == "T" {
					t.Fatalf("%v stopped the server (state %s)", sig, st)
				}
			}
			signal(syscall.SIGTTIN, 3)
			signal(syscall.SIGTTIN, 4)
			// Each of the four serves its share of the load.
			eventually(t, 30*time.Second, "requests served by the worker of each slot", func() bool {
				for slot := range 4 {
					if metricNumber(t, admin, `ruvoy_worker_request_queue_seconds_count{worker="`+strconv.Itoa(slot)+`"}`) == 0 {
						return false
					}
				}
				return true
			})
			signal(syscall.SIGTTOU, 3)
			signal(syscall.SIGTTOU, 2)
			signal(syscall.SIGTTOU, 1)
			s.cmd.Process.Signal(syscall.SIGTTOU) // the last one stays
			s.waitStderr(t, "it keeps it", 1)
			equal(t, "workers after a SIGTTOU too many", workers(), 1)
			time.Sleep(200 * time.Millisecond)
			stop.Store(true)
			wg.Wait()
			if failed.Load() != 0 || ok.Load() < 20 {
				t.Fatalf("under load: %d answered 200, %d failed", ok.Load(), failed.Load())
			}
			s.waitStderr(t, `"msg":"ruvoy: a worker added (SIGTTIN)"`, 2)
			s.waitStderr(t, `"msg":"ruvoy: a worker retires (SIGTTOU): it finishes its requests first"`, 3)
			equal(t, "exit status", s.stop(), 0)
		})
	}
}

// In one process there are no workers to add or retire: SIGTTIN and
// SIGTTOU are logged and ignored, never Go's default for them (stopping
// the whole server), and it goes on serving. SIGWINCH and SIGURG (which
// Go's scheduler uses) change nothing either.
func TestCoreSignalsOfHabit(t *testing.T) {
	s := start(t, app("core.ru"))
	for _, sig := range []syscall.Signal{syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGWINCH, syscall.SIGURG} {
		if err := s.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if st := procState(s.cmd.Process.Pid); st == "T" {
			t.Fatalf("%v stopped the server", sig)
		}
		equal(t, "serving after "+sig.String(), s.get(t, "/raw/hello").body, "hello world")
	}
	s.waitStderr(t, `"msg":"ruvoy: SIGTTIN ignored: the app runs in this process, without workers (--workers N adds them)"`, 1)
	s.waitStderr(t, `"msg":"ruvoy: SIGTTOU ignored: the app runs in this process, without workers (--workers N adds them)"`, 1)
	equal(t, "exit status", s.stop(), 0)
}
