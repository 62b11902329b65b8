package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// judgement is fixed before the run and printed with the results.
const judgement = `An advantage is claimed only when both the median throughput and the
median p99 improve by more than the larger of 5% and the observed
round-to-round variation (relative standard deviation) of either server in
that metric. "ahead" and "behind" are that rule; anything else is "no clear
difference". For time to first byte, lower is better in both numbers. A
lower-is-better improvement is measured as theirs / ours - 1 (restated on
2026-12-02: ours < theirs * (1 - rsd) could claim no difference once an rsd
passed 100%).`

// cell is one server in one scenario: its medians over the good rounds.
type cell struct {
	value, p50, p99 float64
	rsdV, rsdP      float64
	cpu, rss, vmUs  float64
	cpuReq, pss     float64 // CPU µs a request; PSS MiB as the load ended
	good, failed    int
	slowed          int  // rounds left out: a core ran slowed (cores.go)
	allSlowed       bool // every good round was: they are used, and say so
	notes           []string
}

func (r *runner) cell(server, scen string) (cell, bool) {
	var c cell
	var vals, p50s, p99s, cpus, rsss, vms, reqs, psss []float64
	var ok, unslowed []sample
	for _, s := range r.results[key{server, scen}] {
		if !s.ok {
			c.failed++
			c.notes = append(c.notes, strings.TrimSpace(s.note))
			continue
		}
		ok = append(ok, s)
		if !r.slowed(s) {
			unslowed = append(unslowed, s)
		}
	}
	c.slowed = len(ok) - len(unslowed)
	good := unslowed
	if len(good) == 0 && len(ok) > 0 {
		good, c.allSlowed = ok, true
	}
	for _, s := range good {
		vals, p50s, p99s = append(vals, s.value), append(p50s, s.p50ms), append(p99s, s.p99ms)
		cpus, rsss, psss = append(cpus, s.cpuPct), append(rsss, s.maxRSS), append(psss, s.pss)
		if us := s.cpuPerRequest(); us > 0 {
			reqs = append(reqs, us)
		}
		if s.vmNanos > 0 && s.requests > 0 {
			vms = append(vms, float64(s.vmNanos)/1000/s.requests)
		}
	}
	c.good = len(vals)
	if c.good == 0 {
		return c, c.failed > 0
	}
	c.value, c.p50, c.p99, c.rsdV, c.rsdP = median(vals), median(p50s), median(p99s), rsd(vals), rsd(p99s)
	c.cpu, c.rss, c.pss = median(cpus), median(rsss), median(psss)
	if len(reqs) > 0 {
		c.cpuReq = median(reqs)
	}
	if len(vms) > 0 {
		c.vmUs = median(vms)
	}
	return c, true
}

// verdict applies the judgement to ruvoy against a peer.
func verdict(rv, peer cell, lowerIsBetter bool) string {
	mV := math.Max(0.05, math.Max(rv.rsdV, peer.rsdV))
	mP := math.Max(0.05, math.Max(rv.rsdP, peer.rsdP))
	better := func(a, b, m float64, lower bool) bool {
		if lower {
			return b/a-1 > m
		}
		return a > b*(1+m)
	}
	switch {
	case better(rv.value, peer.value, mV, lowerIsBetter) && better(rv.p99, peer.p99, mP, true):
		return "ruvoy ahead"
	case better(peer.value, rv.value, mV, lowerIsBetter) && better(peer.p99, rv.p99, mP, true):
		return "ruvoy behind"
	}
	return "no clear difference"
}

func (r *runner) summary(machine string, servers []server, scens []scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# ruvoy benchmark, %s\n\n%s\n", r.started.Format("2006-01-02 15:04 MST"), machine)
	b.WriteString(rootsNote())
	b.WriteString(peersNote(servers))
	fmt.Fprintf(&b, "Protocol: %d rounds of %s per cell after a %s warm-up, every server started afresh for each fixture, server order rotated every round. A round counts only if every answer was 2xx and no socket error occurred. Before and after each measurement a fixed loop is timed on every core; a round in which a core took more than %.2g times the run's fastest time (the host slowing that vCPU) is left out, unless every round of the cell was. Figures are medians over the rounds that counted, with the relative standard deviation (rsd). CPU %% is the server's whole process group (200%% = both cores), and CPU a request that over its requests a second; RSS is its largest resident set during the run (pages its processes share counted in each), PSS its proportional set size as the load ended (shared pages divided among them).\n\n", *rounds, *duration, *warmup, coreSlowed)
	fmt.Fprintf(&b, "Judgement (fixed before the run):\n\n> %s\n\n", strings.ReplaceAll(judgement, "\n", "\n> "))
	for _, sc := range scens {
		unit := "req/s"
		if sc.name == "ttfb" {
			unit = "ms"
		}
		fmt.Fprintf(&b, "## %s\n\n| server | %s | rsd | p50 ms | p99 ms | rsd | CPU %% | CPU a request | RSS MiB | PSS MiB | ruvoy vs it | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", sc.label, unit)
		for _, srv := range servers {
			if !srv.runs(sc) {
				continue
			}
			c, ran := r.cell(srv.name, sc.name)
			if !ran {
				fmt.Fprintf(&b, "| %s | n/a (%s) | | | | | | | | | | |\n", srv.label, notApplicable(srv, sc))
				continue
			}
			if c.good == 0 {
				fmt.Fprintf(&b, "| %s | no data: %d of %d rounds failed (%s) | | | | | | | | | | |\n", srv.label, c.failed, c.failed, firstNote(c.notes))
				continue
			}
			// Each server is held against the ruvoy on its own Ruby: the
			// host's, or its root's.
			base := "ruvoy"
			if srv.root != nil {
				base = srv.root.suite + ":ruvoy"
			}
			rv, rvOK := r.cell(base, sc.name)
			ratio, v := "", ""
			if rvOK && rv.good > 0 && srv.name != base {
				if sc.name == "ttfb" {
					ratio = fmt.Sprintf("first byte %.2fx sooner", c.value/rv.value)
				} else {
					ratio = fmt.Sprintf("%.2fx req/s, p99 %.2fx", rv.value/c.value, rv.p99/c.p99)
				}
				v = verdict(rv, c, sc.name == "ttfb")
			}
			failed := ""
			if c.failed > 0 {
				failed = fmt.Sprintf(" (%d rounds failed)", c.failed)
			}
			switch {
			case c.allSlowed:
				failed += fmt.Sprintf(" (all %d rounds on a slowed core)", c.slowed)
			case c.slowed > 0:
				failed += fmt.Sprintf(" (%d rounds on a slowed core left out)", c.slowed)
			}
			fmt.Fprintf(&b, "| %s | %.1f%s | %.1f%% | %.3f | %.2f | %.1f%% | %.0f | %s | %.0f | %.0f | %s | %s |\n",
				srv.label, c.value, failed, c.rsdV*100, c.p50, c.p99, c.rsdP*100, c.cpu, perRequest(c.cpuReq), c.rss, c.pss, ratio, v)
		}
		b.WriteString("\n")
	}
	b.WriteString(r.acrossWorkers(servers, scens))
	b.WriteString(r.waitsSummary(servers, scens))
	b.WriteString(r.yjitSummary(servers))
	b.WriteString(r.resources(servers))
	b.WriteString(r.targets(servers))
	return b.String()
}

func notApplicable(srv server, sc scenario) string {
	switch {
	case sc.tls && srv.noTLS != "":
		return srv.noTLS
	case sc.tls:
		return "no TLS"
	default:
		return "not run"
	}
}

func firstNote(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return notes[0]
}

func (r *runner) resources(servers []server) string {
	var b strings.Builder
	b.WriteString("## Memory at rest and the VM thread\n\n| server | RSS at rest MiB (after warm-up) | VM-thread CPU per request, no-op |\n|---|---|---|\n")
	for _, srv := range servers {
		rest := r.restRSS[srv.name]
		if len(rest) == 0 {
			continue
		}
		vm := ""
		if c, _ := r.cell(srv.name, "noop"); c.vmUs > 0 {
			vm = fmt.Sprintf("%.1f µs", c.vmUs)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s |\n", srv.label, median(rest), vm)
	}
	return b.String() + "\n"
}

// targets checks issue 8's targets against this run's medians.
func (r *runner) targets(servers []server) string {
	var b strings.Builder
	b.WriteString("## Targets (no-op, HTTP/1.1, 100 connections)\n\n| target | measured | met |\n|---|---|---|\n")
	row := func(what, measured string, met bool) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", what, measured, map[bool]string{true: "yes", false: "no"}[met])
	}
	ratioOf := func(ours, scen, peer string, want float64, wantP99 bool) {
		rv, _ := r.cell(ours, scen)
		c, _ := r.cell(peer, scen)
		if rv.good == 0 || c.good == 0 {
			return
		}
		x := rv.value / c.value
		ok := x >= want && (!wantP99 || rv.p99 < c.p99)
		label := peer
		if s, found := serverByName(peer); found {
			label = s.label
		}
		lower := ""
		if wantP99 {
			lower = " with a lower p99"
		}
		if ours != "ruvoy" {
			label = peer + " (" + ours + ")"
		}
		row(fmt.Sprintf("%s: ≥ %.2gx %s%s", scen, want, label, lower), fmt.Sprintf("%.2fx, p99 %.2f vs %.2f ms", x, rv.p99, c.p99), ok)
	}
	ratio := func(scen, peer string, want float64, wantP99 bool) { ratioOf("ruvoy", scen, peer, want, wantP99) }
	// Cluster mode (issue 19): two workers on two cores against one, and
	// against Puma's cluster.
	for _, scen := range []string{"cpu", "rails-json"} {
		ratioOf("ruvoy-w2", scen, "ruvoy-w1", 1.7, false)
		ratioOf("ruvoy-w2", scen, "puma-w2", 1, true)
	}
	best := "puma-5"
	if a, b := r.medianOf("puma-100", "noop"), r.medianOf("puma-5", "noop"); a > b {
		best = "puma-100"
	}
	ratio("noop", best, 2.5, true)
	ratio("noop", "async-http", 2, true)
	ratio("noop", "thin", 1.6, true)
	ratio("noop", "caddy-puma", 5, false)
	for _, srv := range servers {
		if srv.ruby {
			ratio("noop-pinned", srv.name, 1.5, false)
		}
	}
	ratio("noop", "caddy-static", 0.85, false)
	noop, _ := r.cell("ruvoy", "noop")
	if noop.vmUs > 0 {
		row("VM-thread CPU per request ≤ 4 µs", fmt.Sprintf("%.1f µs", noop.vmUs), noop.vmUs <= 4)
	}
	// Under load needs the no-op scenario in this run.
	if noop.good > 0 && len(r.restRSS["ruvoy"]) > 0 {
		rest := median(r.restRSS["ruvoy"])
		row("RSS ≤ 100 MiB at rest and under no-op load", fmt.Sprintf("%.0f MiB at rest, %.0f MiB under load", rest, noop.rss),
			rest <= 100 && noop.rss <= 100)
	}
	return b.String()
}

func (r *runner) medianOf(server, scen string) float64 {
	c, _ := r.cell(server, scen)
	return c.value
}

// cpuPerRequest is the server's CPU time a request in µs (0 for a
// lower-is-better figure, which is no rate).
func (s sample) cpuPerRequest() float64 {
	if s.lowerIsBetter || s.value <= 0 {
		return 0
	}
	return s.cpuPct / 100 / s.value * 1e6
}

// perRequest formats µs of CPU a request: "89 µs", "4.85 ms".
func perRequest(us float64) string {
	switch {
	case us <= 0:
		return ""
	case us >= 1000:
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// rootsNote says what the Debian roots in the run ship, for their cells.
func rootsNote() string {
	var b strings.Builder
	for _, suite := range rootSuites() {
		d := roots[suite]
		fmt.Fprintf(&b, "Servers named \"%s: ...\" ran in a Debian %s root (build/debian-root.sh, %s), on %s, ruvoy built there from the same checkout; each is held against that root's ruvoy.\n", d.suite, d.suite, d.dir, d.versions)
	}
	return b.String()
}

// acrossWorkers sets ruvoy beside Puma on the Rails page, one process and
// each cluster size, on the host's Ruby and on each root's.
func (r *runner) acrossWorkers(servers []server, scens []scenario) string {
	const scen = "rails-page"
	if _, ok := scenarioByName(scen); !ok || !slices.ContainsFunc(scens, func(s scenario) bool { return s.name == scen }) {
		return ""
	}
	ran := map[string]bool{}
	for _, srv := range servers {
		ran[srv.name] = true
	}
	prefixes := []string{""}
	for _, suite := range rootSuites() {
		prefixes = append(prefixes, suite+":")
	}
	pairs := [][2]string{{"ruvoy", "puma-5"}, {"ruvoy-w1", "puma-w1"}, {"ruvoy-w2", "puma-w2"}, {"ruvoy-w2", "puma-w2-preload"}, {"ruvoy-w2-preload", "puma-w2-preload"}}
	var b strings.Builder
	for _, prefix := range prefixes {
		for _, p := range pairs {
			ours, theirs := prefix+p[0], prefix+p[1]
			if !ran[ours] || !ran[theirs] {
				continue
			}
			rv, _ := r.cell(ours, scen)
			c, _ := r.cell(theirs, scen)
			if rv.good == 0 || c.good == 0 {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("## Rails page across workers\n\n| servers | ruvoy req/s (p99 ms) | Puma req/s (p99 ms) | ruvoy / Puma | CPU a request, ruvoy / Puma | PSS MiB, ruvoy / Puma |\n|---|---|---|---|---|---|\n")
			}
			label := func(name string) string { s, _ := serverByName(name); return s.label }
			fmt.Fprintf(&b, "| %s against %s | %.1f (%.0f) | %.1f (%.0f) | %.2fx | %s / %s | %.0f / %.0f |\n",
				label(ours), label(theirs), rv.value, rv.p99, c.value, c.p99, rv.value/c.value,
				perRequest(rv.cpuReq), perRequest(c.cpuReq), rv.pss, c.pss)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\n"
}
