package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// A scenario: a load against one path of bench/apps/bench.ru, giving a
// throughput (or, for ttfb, requests measured) and a p99 in ms.
type scenario struct {
	name, label string
	measure     func(url, raw string) sample
	app         string // the fixture it runs against: "bench" (default) or "rails"
}

var scenarios = []scenario{
	{"noop", "no-op, HTTP/1.1, 100 connections", func(url, raw string) sample {
		return wrk(raw, url+"/", 100, "")
	}, ""},
	{"upload", "256 KiB uploads, 10 connections", func(url, raw string) sample {
		return wrk(raw, url+"/upload", 10, uploadScript())
	}, ""},
	{"ttfb", "time to first byte of a streamed response (p50/p99 ms)", ttfb, ""},
	{"wait50", "app sleeps 50 ms (scheduler-aware), 100 connections", func(url, raw string) sample {
		return wrk(raw, url+"/wait50", 100, "")
	}, ""},
	{"block50", "50 ms blocking C call on the request's thread, 100 connections", func(url, raw string) sample {
		return wrk(raw, url+"/block50", 100, "")
	}, ""},
	{"block50-offload", "50 ms blocking C call, Ruvoy.offload under ruvoy, 100 connections", func(url, raw string) sample {
		return wrk(raw, url+"/block50-offload", 100, "")
	}, ""},
	{"rails-json", "Rails 6.1 JSON show (examples/rails, SQLite), 20 connections", func(url, raw string) sample {
		return wrk(raw, url+"/articles/1.json", 20, "")
	}, "rails"},
}

func scenarioNames() []string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
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
	os.WriteFile(path, []byte(script), 0o644)
	return path
}

// ttfb asks for /stream one request at a time for the duration and reports
// the median time to first byte as value and its p99.
func ttfb(url, raw string) sample {
	c := &http.Client{Timeout: 10 * time.Second}
	var times []float64
	deadline := time.Now().Add(*duration)
	for time.Now().Before(deadline) {
		began := time.Now()
		res, err := c.Get(url + "/stream")
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
	line := fmt.Sprintf("ttfb %d requests p50 %.3f ms p99 %.3f ms\n", len(times), median(times), times[len(times)*99/100])
	os.WriteFile(raw, []byte(line), 0o644)
	return sample{value: median(times), p99ms: times[len(times)*99/100], ok: true, lowerIsBetter: true}
}

// warmPath is what the warm-up asks for before a fixture's scenarios run.
func (s scenario) warmPath() string {
	if s.app == "rails" {
		return "/articles/1.json"
	}
	return "/"
}
