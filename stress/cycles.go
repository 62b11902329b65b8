package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	upload256k = make([]byte, 256<<10)
	upload1m   = make([]byte, 1<<20)
)

// steadyLoads is the traffic every steady phase carries: well under the
// admission and body budgets, so every answer must be a 200.
func steadyLoads() []load {
	return []load{
		{name: "h2 no-op", workers: 16, h2c: true, method: "GET", path: "/noop", kind: steady},
		{name: "h1 wait200", workers: 32, method: "GET", path: "/wait200", kind: steady},
		{name: "h1 256 KiB upload", workers: 4, method: "POST", path: "/upload", body: upload256k, kind: steady},
	}
}

type cycleResult struct {
	after     resources
	restRSS   int64 // after the cycle, once the server was idle a while
	peakRSS   int64 // during the body overload
	idleRSS   int64 // right before it
	requests  int64
	took      time.Duration
	phaseNote string
}

func (h *harness) runCycles(n int) bool {
	var results []cycleResult
	for i := 1; i <= n; i++ {
		results = append(results, h.cycle(i))
	}
	return h.report(results, false)
}

func during(d time.Duration, f func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	f(ctx)
}

func (h *harness) cycle(n int) cycleResult {
	began := time.Now()
	before := h.counts.total.Load()
	var r cycleResult
	ctx, stopProbe := context.WithCancel(context.Background())
	var probing sync.WaitGroup
	probing.Add(2)
	go func() { defer probing.Done(); h.probeControl(ctx) }()
	go func() { defer probing.Done(); h.probeAdmin(ctx) }()

	step := func(what string) {
		h.lat.setPhase(fmt.Sprintf("%d %s", n, what))
		fmt.Printf("cycle %d: %-28s (%v; control max so far %v)\n", n, what, time.Since(began).Round(time.Second),
			time.Duration(h.counts.controlMaxNs.Load()).Round(time.Millisecond))
	}

	step("steady traffic")
	during(*phase, func(ctx context.Context) { h.run(ctx, steadyLoads()...) })

	step("request-count overload")
	during(*phase, func(ctx context.Context) {
		h.run(ctx, load{name: "count overload", workers: 3 * maxRequests, method: "GET", path: "/wait200", kind: overload})
	})
	h.quiesce()

	step("request-body overload")
	// RSS alone, read from /proc: resources() also asks the control app
	// for /stats, three full GCs that hold the VM thread (100-220 ms each
	// under this load, by the hold detector), which every 100 ms made the
	// control probe wait behind the harness's own measurement.
	pid := h.cmd.Process.Pid
	r.idleRSS = rss(pid) // idle, after the phases before warmed it up
	var peak atomic.Int64
	during(*phase, func(ctx context.Context) {
		go func() {
			for ctx.Err() == nil {
				if v := rss(pid); v > peak.Load() {
					peak.Store(v)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		// 300 uploads of 1 MiB at once: each holds its 128 KiB working set
		// and up to 384 KiB of body, more than the budget can hold.
		h.run(ctx, load{name: "body overload", workers: 300, method: "POST", path: "/upload", body: upload1m, kind: overload})
	})
	r.peakRSS = peak.Load()
	h.quiesce()

	step("128 cancelled requests")
	h.cancelled(128)
	h.quiesce()

	step("recovery")
	during(*phase, func(ctx context.Context) {
		h.run(ctx,
			load{name: "recovery no-op", workers: 25, method: "GET", path: "/noop", kind: recovery},
			load{name: "recovery wait200", workers: 25, method: "GET", path: "/wait200", kind: recovery})
	})
	step("done")
	stopProbe()
	probing.Wait()
	h.quiesce()
	r.restRSS = h.restRSS()
	r.after = h.resources()
	r.requests = h.counts.total.Load() - before
	r.took = time.Since(began)
	return r
}

// report prints what the run saw and judges it; a soak (steady traffic
// only) is not held to the overload phases' checks.
func (h *harness) report(results []cycleResult, soak bool) bool {
	c := h.counts
	fmt.Println()
	fmt.Printf("RSS at rest after start: %d MiB\n\n", h.bootRSS>>20)
	fmt.Println("| cycle | requests | fds after | threads after (Go's) | goroutines after | Ruby heap live slots | idle RSS before body overload MiB | peak RSS in body overload MiB | RSS at rest after MiB |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for i, r := range results {
		fmt.Printf("| %d | %d | %d | %s | %d | %d | %d | %d | %d |\n", i+1, r.requests, r.after.fds, fmt.Sprintf("%d (%d)", r.after.threads, r.after.goThreads),
			r.after.goroutines, r.after.heapLiveSlots, r.idleRSS>>20, r.peakRSS>>20, r.restRSS>>20)
	}
	fmt.Println()
	fmt.Println("| total requests | HTTP 200 | expected 503 | transport errors | other statuses | steady failures | recovery failures | control failures | control max latency |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %d | %d | %d | %d | %d | %d | %d | %d | %v |\n", c.total.Load(), c.ok.Load(), c.expected503.Load(),
		c.transport.Load(), c.unexpected.Load(), c.steadyFailed.Load(), c.recoveryFailed.Load(), c.controlFailed.Load(),
		time.Duration(c.controlMaxNs.Load()).Round(time.Millisecond))

	h.lat.print()

	var problems []string
	if c.transport.Load() > 0 {
		problems = append(problems, "transport errors")
	}
	if c.steadyFailed.Load()+c.recoveryFailed.Load()+c.controlFailed.Load() > 0 {
		problems = append(problems, "steady, recovery or control requests failed")
	}
	if c.unexpected.Load() > 0 {
		problems = append(problems, "answers other than 200 or an expected 503")
	}
	if c.expected503.Load() == 0 && !soak {
		problems = append(problems, "the overload phases saw no 503: they did not overload")
	}
	first, last := results[0], results[len(results)-1]
	if last.after.fds > first.after.fds+2 {
		problems = append(problems, fmt.Sprintf("file descriptors grew from %d to %d", first.after.fds, last.after.fds))
	}
	if other := func(r resources) int { return r.threads - r.goThreads }; other(last.after) > other(first.after)+2 {
		problems = append(problems, fmt.Sprintf("non-Go threads (VM, Ruby, offload) grew from %d to %d", other(first.after), other(last.after)))
	}
	if last.after.goThreads > first.after.goThreads+8 {
		problems = append(problems, fmt.Sprintf("Go runtime threads grew from %d to %d", first.after.goThreads, last.after.goThreads))
	}
	if last.after.goroutines > first.after.goroutines+10 {
		problems = append(problems, fmt.Sprintf("goroutines grew from %d to %d", first.after.goroutines, last.after.goroutines))
	}
	if last.after.heapLiveSlots > first.after.heapLiveSlots+2000 {
		problems = append(problems, fmt.Sprintf("Ruby's live heap grew from %d to %d slots",
			first.after.heapLiveSlots, last.after.heapLiveSlots))
	}
	// At rest, after the first cycle has warmed what a server keeps (its
	// fiber pool, Ruby's and Go's heaps), RSS must come back to where it
	// was: a burst's free memory is given back once the server is idle.
	if first.restRSS > 0 && last.restRSS > first.restRSS+first.restRSS/5 {
		problems = append(problems, fmt.Sprintf("RSS at rest grew from %d MiB after the first cycle to %d MiB after the last (over 20%%)",
			first.restRSS>>20, last.restRSS>>20))
	}
	for _, r := range results {
		if soak {
			break
		}
		if r.peakRSS > r.idleRSS+bodyBudget+64<<20 {
			problems = append(problems, fmt.Sprintf("peak RSS %d MiB under body overload is over idle %d MiB + budget + 64 MiB",
				r.peakRSS>>20, r.idleRSS>>20))
		}
	}
	c.samples.Range(func(k, _ any) bool { fmt.Println("  seen:", k); return true })
	if len(problems) > 0 {
		fmt.Println("problems:\n  " + strings.Join(problems, "\n  "))
		return false
	}
	return true
}

// runSoak carries steady traffic for d, printing resources every minute.
func (h *harness) runSoak(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() { h.run(ctx, steadyLoads()...); close(done) }()
	h.lat.setPhase("soak")
	go h.probeControl(ctx)
	go h.probeAdmin(ctx)
	fmt.Println("| minute | requests | fds | threads | goroutines | Ruby heap live slots | RSS MiB |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var first resources
	for m := 1; ; m++ {
		select {
		case <-done:
			h.lat.setPhase("after the soak")
			h.quiesce()
			last := h.resources()
			fmt.Printf("| end | %d | %d | %d | %d | %d | %d |\n", h.counts.total.Load(), last.fds, last.threads,
				last.goroutines, last.heapLiveSlots, last.rss>>20)
			rest := h.restRSS()
			return h.report([]cycleResult{{after: first, restRSS: first.rss}, {after: last, restRSS: rest}}, true)
		case <-time.After(time.Minute):
		}
		r := h.resources()
		if m == 1 {
			first = r
		}
		fmt.Printf("| %d | %d | %d | %d | %d | %d | %d |\n", m, h.counts.total.Load(), r.fds, r.threads,
			r.goroutines, r.heapLiveSlots, r.rss>>20)
	}
}
