package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/testserver"
)

type sample struct {
	value         float64 // requests/s, or ms when lowerIsBetter
	p50ms, p99ms  float64
	ok            bool
	lowerIsBetter bool
	note          string
	requests      float64 // completed in the measurement
	usage
	slowestCore time.Duration // the probe loop's longest time on a core, before or after (cores.go)
}

type key struct{ server, scenario string }

type runner struct {
	root, out  string
	started    time.Time
	cert, key  string
	results    map[key][]sample
	restRSS    map[string][]float64 // MiB after start and warm-up, before load
	rails      *fixture             // examples/rails, prepared when a scenario needs it
	railsPG    *fixture             // the same on PostgreSQL, with the pages that wait (waits.go)
	thinWraps  map[string]string    // rackup -> its Rack::ContentLength wrapper
	sawFailure bool
	fastest    time.Duration         // the probe loop's shortest time on any core in this run
	yjitMem    map[string][]yjitProc // each server's processes' YJIT sizes (yjit.go)
}

// A fixture is a rackup the servers run, in its directory, with its env.
type fixture struct {
	dir, rackup string
	env         []string
}

// group is the scenarios one server start serves: same fixture, TLS or
// not, pinned or not.
type group struct {
	app         string
	tls, pinned bool
}

func (r *runner) round(n int, srv server, scens []scenario) {
	var order []group
	byGroup := map[group][]scenario{}
	for _, sc := range scens {
		if !srv.runs(sc) {
			continue
		}
		g := group{sc.app, sc.tls, sc.pinned}
		if _, seen := byGroup[g]; !seen {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], sc)
	}
	for _, g := range order {
		f := &fixture{dir: r.root, rackup: filepath.Join(r.root, "bench/apps/bench.ru")}
		if srv.root != nil {
			f = srv.root.benchFixture()
		}
		if g.app == "rails" {
			f = r.railsFixture(srv.root)
		}
		if g.app == "rails-pg" {
			f = r.railsPGFixture(srv.root)
		}
		r.serve(n, srv, f, g, byGroup[g])
	}
}

func (r *runner) serve(n int, srv server, f *fixture, g group, scens []scenario) {
	l := launch{root: r.root, out: r.out, port: freePort(), backend: freePort(), rackup: f.rackup,
		tls: g.tls, cert: r.cert, key: r.key, thinRackup: r.thinWrap(f.rackup)}
	if srv.root != nil {
		l.root = inRoot // the binaries built in the root's copy
	}
	cmd := srv.start(l)
	if cmd == nil {
		return // cannot serve this group (no TLS): n/a in the summary
	}
	srvEnv, stats := r.yjitStats(srv, n, f)
	if g.pinned {
		cmd = exec.Command("taskset", append([]string{"-c", "1", cmd.Path}, cmd.Args[1:]...)...)
	}
	if srv.root != nil {
		env := append(append([]string{"RACK_ENV=production", "RUVOY_TEST_EXT=" + srv.root.ext}, f.env...), srvEnv...)
		cmd = srv.root.command(r.root, f.dir, env, cmd.Args...)
	} else {
		cmd.Dir = f.dir
		cmd.Env = append(append(append(os.Environ(), "RACK_ENV=production"), f.env...), srvEnv...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tag := fmt.Sprintf("%s-%s", strings.ReplaceAll(srv.name, ":", "-"), filepath.Base(f.dir))
	if g.tls {
		tag += "-tls"
	}
	if g.pinned {
		tag += "-pinned"
	}
	logf, _ := os.Create(filepath.Join(r.out, fmt.Sprintf("%s-round%d.log", tag, n+1)))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		fmt.Printf("round %d %s: %v\n", n+1, srv.label, err)
		return
	}
	defer func() {
		stop(cmd)
		r.readYJITStats(srv, stats)
	}()
	scheme := "http"
	if g.tls {
		scheme = "https"
	}
	url := scheme + "://127.0.0.1:" + l.port
	if !waitListening("127.0.0.1:"+l.port) || srv.waitBackend && !waitListening("127.0.0.1:"+l.backend) {
		fmt.Printf("round %d %s: did not start (see %s)\n", n+1, srv.label, logf.Name())
		for _, sc := range scens {
			r.record(srv, sc, sample{note: "did not start"})
		}
		return
	}
	wrkRun(g.pinned, url+scens[0].warmPath(), 20, *warmup, "") // warm-up
	if g == (group{}) {
		_, rss := groupStat(cmd.Process.Pid)
		r.restRSS[srv.name] = append(r.restRSS[srv.name], rss)
	}
	for _, sc := range scens {
		settle(url + sc.warmPath())
		raw := filepath.Join(r.out, fmt.Sprintf("%s-%s-round%d.txt", sc.name, strings.ReplaceAll(srv.name, ":", "-"), n+1))
		before := probeCores()
		smp := startSampler(cmd.Process.Pid)
		s := sc.measure(target{url: url, raw: raw, pinned: g.pinned, closes: srv.closes})
		s.usage = smp.finish()
		after := probeCores()
		cores := perCore(before, after)
		s.slowestCore = slices.Max(append(cores, 0))
		r.noteFastest(before, after)
		r.record(srv, sc, s)
		unit := "req/s"
		if s.lowerIsBetter {
			unit = "ms"
		}
		fmt.Printf("round %d  %-16s %-26s %10.2f %-5s p50 %7.3f ms p99 %8.2f ms  cpu %4.0f%% %s  rss %5.0f MiB  pss %5.0f MiB  cores %s %s\n",
			n+1, sc.name, srv.label, s.value, unit, s.p50ms, s.p99ms, s.cpuPct, perRequest(s.cpuPerRequest()), s.maxRSS, s.pss, millis(cores), s.note)
	}
}

// noteFastest keeps the shortest probe time seen on any core: what a
// core does unslowed, as far as this run saw.
func (r *runner) noteFastest(probes ...[]time.Duration) {
	for _, probe := range probes {
		for _, t := range probe {
			if t > 0 && (r.fastest == 0 || t < r.fastest) {
				r.fastest = t
			}
		}
	}
}

// slowed says whether a round ran while the host slowed a core.
func (r *runner) slowed(s sample) bool {
	return r.fastest > 0 && float64(s.slowestCore) > float64(r.fastest)*coreSlowed
}

// millis is each core's probe time for the round's line: "21/22ms".
func millis(cores []time.Duration) string {
	var parts []string
	for _, t := range cores {
		parts = append(parts, strconv.FormatInt(t.Milliseconds(), 10))
	}
	return strings.Join(parts, "/") + "ms"
}

func (r *runner) record(srv server, sc scenario, s sample) {
	if !s.ok {
		r.sawFailure = true
	}
	r.results[key{srv.name, sc.name}] = append(r.results[key{srv.name, sc.name}], s)
}

// thinWrap writes a rackup that serves rackup behind Rack::ContentLength,
// without which Thin closes every connection.
func (r *runner) thinWrap(rackup string) string {
	if w, ok := r.thinWraps[rackup]; ok {
		return w
	}
	w := filepath.Join(r.out, fmt.Sprintf("thin-%d.ru", len(r.thinWraps)))
	src := fmt.Sprintf("require \"rack\"\nuse Rack::ContentLength\nrun Rack::Builder.parse_file(%q).first\n", rackup)
	check(os.WriteFile(w, []byte(src), 0o644))
	r.thinWraps[rackup] = w
	return w
}

// settle waits until the server answers a plain request quickly: one still
// working through the previous scenario's backlog (a blocked reactor, a
// single worker) would otherwise be measured on that backlog.
func settle(url string) {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		began := time.Now()
		if res, err := c.Get(url); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode < 300 && time.Since(began) < 200*time.Millisecond {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	// Proxies' backends and nginx workers are in the group too.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

func freePort() string {
	port, err := testserver.FreePort()
	check(err)
	return port
}

func waitListening(addr string) bool {
	return testserver.WaitListening(addr, 30*time.Second, nil) == nil
}

func itoa(n int) string { return strconv.Itoa(n) }
