package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	value, p99ms  float64 // value: requests/s, or ms when lowerIsBetter
	ok            bool
	lowerIsBetter bool
	note          string
}

type key struct{ server, scenario string }

type runner struct {
	root, out string
	results   map[key][]sample
	rails     *fixture // examples/rails, prepared when a scenario needs it
}

// A fixture is a rackup the servers run, in its directory, with its env.
type fixture struct {
	dir, rackup string
	env         []string
}

// round starts srv once per fixture and measures its scenarios.
func (r *runner) round(n int, srv server, scens []scenario) {
	byApp := map[string][]scenario{}
	var apps []string
	for _, sc := range scens {
		if _, seen := byApp[sc.app]; !seen {
			apps = append(apps, sc.app)
		}
		byApp[sc.app] = append(byApp[sc.app], sc)
	}
	for _, app := range apps {
		f := &fixture{dir: r.root, rackup: filepath.Join(r.root, "bench/apps/bench.ru")}
		if app == "rails" {
			f = r.railsFixture()
		}
		r.serve(n, srv, f, byApp[app])
	}
}

func (r *runner) serve(n int, srv server, f *fixture, scens []scenario) {
	port := freePort()
	cmd := srv.cmd(r.root, port, f.rackup)
	cmd.Dir = f.dir
	cmd.Env = append(append(os.Environ(), "RACK_ENV=production"), f.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, _ := os.Create(filepath.Join(r.out, fmt.Sprintf("%s-%s-round%d.log", srv.name, filepath.Base(f.dir), n+1)))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		fmt.Printf("round %d %s: %v\n", n+1, srv.label, err)
		return
	}
	defer stop(cmd)
	url := "http://127.0.0.1:" + port
	if !waitListening("127.0.0.1:" + port) {
		fmt.Printf("round %d %s: did not start\n", n+1, srv.label)
		return
	}
	wrkRun(url+scens[0].warmPath(), 20, 2*time.Second, "") // warm-up
	for _, sc := range scens {
		raw := filepath.Join(r.out, fmt.Sprintf("%s-%s-round%d.txt", sc.name, srv.name, n+1))
		s := sc.measure(url, raw)
		r.results[key{srv.name, sc.name}] = append(r.results[key{srv.name, sc.name}], s)
		unit := "req/s"
		if s.lowerIsBetter {
			unit = "ms"
		}
		fmt.Printf("round %d  %-8s %-22s %10.2f %s  p99 %8.2f ms %s\n", n+1, sc.name, srv.label, s.value, unit, s.p99ms, s.note)
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
}

func (r *runner) summary(servers []server, scens []scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Medians of %d rounds (relative standard deviation); ratios are ruvoy over each peer.\n\n", *rounds)
	for _, sc := range scens {
		fmt.Fprintf(&b, "### %s\n\n| server | median | rsd | p99 ms | ruvoy vs it |\n|---|---|---|---|---|\n", sc.label)
		med := map[string][2]float64{}
		for _, srv := range servers {
			var vals, p99s []float64
			failed := 0
			for _, s := range r.results[key{srv.name, sc.name}] {
				if s.ok {
					vals = append(vals, s.value)
					p99s = append(p99s, s.p99ms)
				} else {
					failed++
				}
			}
			if len(vals) == 0 {
				fmt.Fprintf(&b, "| %s | no data (%d failed) | | | |\n", srv.label, failed)
				continue
			}
			med[srv.name] = [2]float64{median(vals), median(p99s)}
		}
		for _, srv := range servers {
			m, ok := med[srv.name]
			if !ok {
				continue
			}
			var vals []float64
			for _, s := range r.results[key{srv.name, sc.name}] {
				if s.ok {
					vals = append(vals, s.value)
				}
			}
			ratio := ""
			if rv, ok := med["ruvoy"]; ok && srv.name != "ruvoy" {
				if sc.name == "ttfb" {
					ratio = fmt.Sprintf("%.2fx faster first byte", m[0]/rv[0])
				} else {
					ratio = fmt.Sprintf("%.2fx throughput, p99 %.2fx", rv[0]/m[0], rv[1]/m[1])
				}
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.1f%% | %.2f | %s |\n", srv.label, m[0], rsd(vals)*100, m[1], ratio)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ---- wrk ----

func wrk(raw, url string, conns int, script string) sample {
	out := wrkRun(url, conns, *duration, script)
	os.WriteFile(raw, []byte(out), 0o644)
	return parseWrk(out)
}

func wrkRun(url string, conns int, d time.Duration, script string) string {
	args := []string{"-t1", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency", "--timeout", "10s"}
	if script != "" {
		args = append(args, "-s", script)
	}
	out, _ := exec.Command("wrk", append(args, url)...).CombinedOutput()
	return string(out)
}

var (
	rpsRe    = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	p99Re    = regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`)
	errorsRe = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	non2xxRe = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

func parseWrk(out string) sample {
	var s sample
	if m := rpsRe.FindStringSubmatch(out); m != nil {
		s.value, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := p99Re.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		switch m[2] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		s.p99ms = v
	}
	s.ok = s.value > 0
	if m := errorsRe.FindStringSubmatch(out); m != nil {
		s.ok = false
		s.note = "socket errors (connect/read/write/timeout): " + strings.Join(m[1:], "/")
	}
	if m := non2xxRe.FindStringSubmatch(out); m != nil {
		s.ok = false
		s.note += " non-2xx: " + m[1]
	}
	if !s.ok && s.note == "" {
		s.note = "no result"
	}
	return s
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func waitListening(addr string) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
