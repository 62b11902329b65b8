// Command wsload benchmarks WebSocket servers side by side (bench/ws):
// each round starts every server afresh, in an order rotated every round,
// serving bench/apps/ws.ru, and measures
//
//   - idle: the server's memory and descriptors per idle WebSocket, from
//     its process group's RSS before and after opening -idle of them;
//   - echo round trips a second (and p99) on 1 and on 100 connections;
//   - fan-out: the time until a message one client sends reaches all of
//     -listeners (the median of -messages such messages).
//
// Then it prints the medians over the rounds and each server's ratio to
// ruvoy. A measurement that fails (a connection refused or reset, a wrong
// echo) has no data in its round.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

var (
	rounds    = flag.Int("rounds", 5, "rounds; every server is started afresh in each")
	duration  = flag.Duration("duration", 5*time.Second, "each echo measurement's length")
	idle      = flag.Int("idle", 5000, "idle WebSockets to hold (the servers' RLIMIT_NOFILE bounds it)")
	listeners = flag.Int("listeners", 1000, "fan-out listeners")
	messages  = flag.Int("messages", 20, "fan-out messages per round")
	only      = flag.String("servers", "ruvoy,puma,async-websocket", "servers, comma-separated: ruvoy, ruvoy-w1, puma, async-websocket")
)

// A metric is one figure per round; lower: lower is better.
type metric struct {
	name  string
	lower bool
}

var metrics = []metric{
	{"idle: RSS per WebSocket, KiB", true},
	{"idle: descriptors per WebSocket", true},
	{"echo, 1 connection: round trips/s", false},
	{"echo, 1 connection: p99 ms", true},
	{"echo, 100 connections: round trips/s", false},
	{"echo, 100 connections: p99 ms", true},
	{"fan-out: ms until all listeners have it", true},
}

func main() {
	flag.Parse()
	root, err := filepath.Abs(".")
	check(err)
	var list []server
	for _, name := range strings.Split(*only, ",") {
		s, ok := serverByName(strings.TrimSpace(name))
		if !ok {
			check(fmt.Errorf("unknown server %q", name))
		}
		list = append(list, s)
	}
	out := filepath.Join(root, "bench", "results", "ws-"+time.Now().Format("2006-01-02T150405"))
	check(os.MkdirAll(out, 0o755))
	fmt.Printf("%s\n%d rounds, server order rotated each round; idle %d, echo %v, fan-out to %d (%d messages); logs in %s\n\n",
		describe(), *rounds, *idle, *duration, *listeners, *messages, out)
	results := map[string][][]float64{} // server -> metric -> rounds
	skipped := map[string]string{}
	for r := 0; r < *rounds; r++ {
		for i := range list {
			s := list[(i+r)%len(list)]
			if skipped[s.name] != "" {
				continue
			}
			row, why := runRound(root, out, r, s)
			if why != "" {
				skipped[s.name] = why
				fmt.Printf("%s: %s\n", s.name, why)
				continue
			}
			if results[s.name] == nil {
				results[s.name] = make([][]float64, len(metrics))
			}
			for m, v := range row {
				results[s.name][m] = append(results[s.name][m], v)
			}
		}
	}
	fmt.Println()
	printTable(list, results, skipped)
}

// runRound starts s, measures everything once and stops it; the row has
// NaN where a measurement failed.
func runRound(root, out string, r int, s server) ([]float64, string) {
	port := freePort()
	cmd, why := s.start(root, port)
	if cmd == nil {
		return nil, why
	}
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RACK_ENV=production")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(out, fmt.Sprintf("%s-round%d.log", s.name, r+1)))
	check(err)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	check(cmd.Start())
	defer stop(cmd)
	row := make([]float64, len(metrics))
	for i := range row {
		row[i] = math.NaN()
	}
	say := func(format string, args ...any) {
		fmt.Printf("round %d %-16s %s\n", r+1, s.name, fmt.Sprintf(format, args...))
	}
	base := "127.0.0.1:" + port
	if !waitReady("http://" + base + "/") {
		say("did not start (see %s)", logf.Name())
		return row, ""
	}
	url := "ws://" + base
	pgid := cmd.Process.Pid

	// Warm up: faye's reactor starts with the first WebSocket.
	if _, _, err := echoRate(url+"/echo", 10, time.Second); err != nil {
		say("warm-up: %v", err)
		return row, ""
	}
	time.Sleep(time.Second)
	rss0, fds0 := groupMem(pgid)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	conns, err := dialMany(ctx, url+"/echo", *idle)
	if err != nil {
		say("idle: %v", err)
	} else {
		time.Sleep(2 * time.Second) // the server's open events
		rss1, fds1 := groupMem(pgid)
		row[0] = float64(rss1-rss0) / 1024 / float64(*idle)
		row[1] = float64(fds1-fds0) / float64(*idle)
		say("idle: %d WebSockets, RSS %d -> %d MiB (%.1f KiB each), %d -> %d descriptors",
			*idle, rss0>>20, rss1>>20, row[0], fds0, fds1)
		closeAll(conns)
	}
	cancel()
	time.Sleep(2 * time.Second) // the server's close events

	for i, c := range []int{1, 100} {
		rate, p99, err := echoRate(url+"/echo", c, *duration)
		if err != nil {
			say("echo at concurrency %d: %v", c, err)
			continue
		}
		row[2+2*i], row[3+2*i] = rate, float64(p99.Microseconds())/1000
		say("echo at concurrency %d: %.0f round trips/s, p99 %.2f ms", c, rate, row[3+2*i])
	}

	times, err := fanout(url+"/fanout", *listeners, *messages)
	if err != nil {
		say("fan-out: %v", err)
	} else {
		var ms []float64
		for _, t := range times {
			ms = append(ms, float64(t.Microseconds())/1000)
		}
		row[6] = median(ms)
		sort.Float64s(ms)
		say("fan-out to %d: median %.1f ms (min %.1f, max %.1f)", *listeners, row[6], ms[0], ms[len(ms)-1])
	}
	return row, ""
}

func waitReady(url string) bool {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return true
			}
		}
	}
	return false
}

func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it forked
}

// describe names what the figures depend on.
func describe() string {
	cmd := func(name string, args ...string) string {
		out, _ := exec.Command(name, args...).CombinedOutput()
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(line[strings.Index(line, ":")+1:])
				break
			}
		}
	}
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("Machine: %s, %d CPUs, %s; %s; %s; %s; ruvoy at %s; RLIMIT_NOFILE hard %d; load average at start %s. The load generator runs on the same host.",
		model, runtime.NumCPU(), cmd("uname", "-sr"), cmd("ruby", "-v"), runtime.Version(), cmd("puma", "--version"),
		cmd("git", "rev-parse", "--short", "HEAD"), lim.Max, strings.Join(strings.Fields(string(load))[:3], " "))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
