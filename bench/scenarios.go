package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// A scenario: a load against one path of a fixture, giving a throughput
// (or, for ttfb, milliseconds) and a p99 in ms.
type scenario struct {
	name, label string
	measure     func(t target) sample
	app         string // the fixture: "" for bench/apps/bench.ru, "rails"
	tls         bool   // the server terminates TLS
	h2          bool   // needs HTTP/2
	pinned      bool   // server on CPU 1, load generator on CPU 0
	named       bool   // only in a run whose -scenarios names it
}

// target is where a measurement sends its load and writes its raw output.
type target struct {
	url, raw string
	pinned   bool
	closes   bool // see server.closes
}

var scenarios = append([]scenario{
	{name: "noop", label: "no-op, HTTP/1.1, 100 connections", measure: func(t target) sample {
		return wrk(t, "/", 100, "")
	}},
	{name: "noop-pinned", label: "no-op, HTTP/1.1, 100 connections, pinned (server CPU 1, wrk CPU 0)", pinned: true,
		measure: func(t target) sample { return wrk(t, "/", 100, "") }},
	// One connection: every hand-off between threads is paid in full,
	// none is shared with other requests.
	{name: "noop-c1", label: "no-op, HTTP/1.1, one connection", measure: func(t target) sample {
		return wrk(t, "/", 1, "")
	}},
	// The sweep (with noop-c1 and noop): where ruvoy's lead begins.
	sweepScenario(2), sweepScenario(4), sweepScenario(10), sweepScenario(32), sweepScenario(256),
	{name: "h2", label: "no-op, HTTP/2 over TLS (h2load), 100 connections", tls: true, h2: true, measure: h2load},
	{name: "tls", label: "no-op, HTTP/1.1 over TLS 1.3, 100 connections", tls: true, measure: func(t target) sample {
		return wrk(t, "/", 100, "")
	}},
	{name: "wait50", label: "app sleeps 50 ms, 100 connections", measure: func(t target) sample {
		return wrk(t, "/wait50", 100, "")
	}},
	{name: "wait200", label: "app sleeps 200 ms, 100 connections", measure: func(t target) sample {
		return wrk(t, "/wait200", 100, "")
	}},
	{name: "block50", label: "50 ms blocking C call on the request's thread, 100 connections", measure: func(t target) sample {
		return wrk(t, "/block50", 100, "")
	}},
	{name: "block50-offload", label: "50 ms blocking C call, in Ruvoy.offload under ruvoy, 100 connections", measure: func(t target) sample {
		return wrk(t, "/block50-offload", 100, "")
	}},
	{name: "upload", label: "256 KiB uploads, 10 connections", measure: func(t target) sample {
		return wrk(t, "/upload", 10, uploadScript())
	}},
	{name: "1mib", label: "1 MiB responses, 10 connections", measure: func(t target) sample {
		return wrk(t, "/1mib", 10, "")
	}},
	// File bodies (Rack::Files, to_path): sendfile(2) where a server has it.
	{name: "file-1mib", label: "1 MiB file bodies (Rack::Files), 10 connections", measure: func(t target) sample {
		return wrk(t, "/file1mib", 10, "")
	}},
	{name: "file-16mib", label: "16 MiB file bodies (Rack::Files), 10 connections", measure: func(t target) sample {
		return wrk(t, "/file16mib", 10, "")
	}},
	// CPU-bound: a few milliseconds of Ruby per request, where a second
	// core (cluster mode) pays.
	{name: "cpu", label: "3 ms of Ruby per request, 20 connections", measure: func(t target) sample {
		return wrk(t, "/cpu", 20, "")
	}},
	{name: "ttfb", label: "time to first byte of a streamed response, ms (lower is better)", measure: ttfb},
	{name: "rails-json", label: "Rails JSON show (SQLite; examples/rails for Rails 6.1, examples/rails72 for 7.2), 20 connections", app: "rails",
		measure: func(t target) sample { return wrk(t, "/articles/1.json", 20, "") }},
	// A real page: the scaffold's index of 100 articles, HTML from ERB,
	// where Ruby's work dominates (CPU per request and PSS say most).
	{name: "rails-page", label: "Rails scaffold page /articles (100 rows, HTML), 10 connections", app: "rails",
		measure: func(t target) sample { return wrk(t, "/articles", 10, "") }},
}, waitScenarios...)

// sweepNames are the sweep's own scenarios.
var sweepNames = []string{"noop-c2", "noop-c4", "noop-c10", "noop-c32", "noop-c256"}

// sweepScenario is the no-op load at n connections, noop-cN.
func sweepScenario(n int) scenario {
	return scenario{name: fmt.Sprintf("noop-c%d", n), label: fmt.Sprintf("no-op, HTTP/1.1, %d connections", n),
		measure: func(t target) sample { return wrk(t, "/", n, "") }}
}

func scenarioNames() []string {
	var n []string
	for _, s := range scenarios {
		if !s.named {
			n = append(n, s.name)
		}
	}
	return n
}

func scenarioByName(name string) (scenario, bool) {
	for _, s := range scenarios {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

func uploadScript() string {
	path := filepath.Join(os.TempDir(), "ruvoy-bench-upload.lua")
	script := `wrk.method = "POST"
wrk.body = string.rep("x", 262144)
wrk.headers["Content-Type"] = "application/octet-stream"
`
	check(os.WriteFile(path, []byte(script), 0o644))
	return path
}

// ttfb asks for /stream one request at a time for the duration and reports
// the median time to first byte as value and its p99.
func ttfb(t target) sample {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var times []float64
	deadline := time.Now().Add(*duration)
	for time.Now().Before(deadline) {
		began := time.Now()
		res, err := c.Get(t.url + "/stream")
		if err != nil {
			return sample{note: err.Error()}
		}
		buf := make([]byte, 1)
		_, err = io.ReadFull(res.Body, buf)
		first := time.Since(began)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			return sample{note: fmt.Sprintf("status %d, %v", res.StatusCode, err)}
		}
		times = append(times, float64(first.Microseconds())/1000)
	}
	sort.Float64s(times)
	p50, p99 := median(times), times[len(times)*99/100]
	line := fmt.Sprintf("ttfb %d requests p50 %.3f ms p99 %.3f ms\n", len(times), p50, p99)
	os.WriteFile(t.raw, []byte(line), 0o644)
	return sample{value: p50, p50ms: p50, p99ms: p99, ok: true, lowerIsBetter: true, requests: float64(len(times))}
}

// warmPath is what the warm-up asks for before a fixture's scenarios run.
func (s scenario) warmPath() string {
	if s.app == "rails" || s.app == "rails-pg" {
		return "/articles/1.json"
	}
	return "/"
}
