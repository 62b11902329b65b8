package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GC between requests (--gc-when-idle) only acts where a server has
// gaps between requests: a closed loop (wrk) leaves none. The paced
// scenario asks for the Rails scaffold page at a steady rate, open loop
// (a request goes at its time whether or not the others have answered),
// and times each from the moment it was due, so a request that waited
// for another's collection counts in full.
var pacedScenario = scenario{name: "rails-page-paced", named: true, app: "rails",
	label:   fmt.Sprintf("Rails scaffold page /articles (100 rows, HTML), a steady %d requests a second, open loop", pacedRate),
	measure: func(t target) sample { return paced(t, "/articles", pacedRate) }}

// pacedRate keeps one VM busy about 40% of the time on this page (Rails
// 6.1 on Ruby 3.1 here: 20-23 ms of CPU each, 45-48 a second at most in
// one worker), with gaps of 30 ms on average between requests.
const pacedRate = 20

func init() { scenarios = append(scenarios, pacedScenario) }

// paced sends rate requests a second for the run's duration and reports
// the rate answered, p50 and p99 (ms, from each request's due time).
func paced(t target, path string, rate int) sample {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer c.CloseIdleConnections()
	var (
		mu       sync.Mutex
		times    []float64
		failures []string
		wg       sync.WaitGroup
	)
	interval := time.Second / time.Duration(rate)
	began := time.Now()
	n := int(duration.Seconds() * float64(rate))
	for i := 0; i < n; i++ {
		due := began.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Get(t.url + path)
			if err == nil {
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err == nil && res.StatusCode != 200 {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
			}
			took := float64(time.Since(due).Microseconds()) / 1000
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err.Error())
				return
			}
			times = append(times, took)
		}()
	}
	wg.Wait()
	elapsed := time.Since(began).Seconds()
	sort.Float64s(times)
	line := fmt.Sprintf("paced %d/s: %d answered, %d failed in %.1f s", rate, len(times), len(failures), elapsed)
	if len(times) > 0 {
		line += fmt.Sprintf(", p50 %.3f ms p99 %.3f ms", median(times), times[len(times)*99/100])
	}
	os.WriteFile(t.raw, []byte(line+"\n"), 0o644)
	if len(failures) > 0 {
		return sample{note: fmt.Sprintf("%d failed (the first: %s)", len(failures), failures[0])}
	}
	if len(times) == 0 {
		return sample{note: "no request answered"}
	}
	return sample{value: float64(len(times)) / elapsed, p50ms: median(times), p99ms: times[len(times)*99/100],
		ok: true, requests: float64(len(times))}
}

// withGCIdle is a ruvoy server with --gc-when-idle ms (a server's name
// ending +gcidleMS, waits.go).
func withGCIdle(s server, ms string) (server, bool) {
	if n, err := strconv.Atoi(ms); err != nil || n < 1 || !strings.HasPrefix(s.name, "ruvoy") {
		return server{}, false
	}
	start := s.start
	s.start = func(l launch) *exec.Cmd {
		c := start(l)
		c.Args = append([]string{c.Args[0], "--gc-when-idle", ms}, c.Args[1:]...)
		return c
	}
	s.label += ", --gc-when-idle " + ms
	return s, true
}
