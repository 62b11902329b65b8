// Command bench runs ruvoy and its peers side by side in one run and prints
// medians, ratios and a verdict per scenario:
//
//	bench/run [-rounds 5] [-duration 5s] [-servers ruvoy,puma-5,forky:puma-5,...] [-scenarios noop,h2,...]
//	          [-ruvoy-env 'GOMAXPROCS=1']
//
// A server named SUITE:NAME runs in the Debian root of SUITE that
// build/debian-root.sh makes (roots.go): the default run has Puma 8 and
// ruvoy on forky's Ruby 3.3 beside the host's cells. The peers no package
// ships (iodine, Thruster, agoo) are built by bench/peers outside the
// checkout (peers.go); a run leaves out those not built, and says so.
//
// Each round starts every server afresh for each fixture, in an order
// rotated every round, warms it up, and measures each scenario while
// sampling the server's CPU and memory. A measurement with socket errors or
// non-2xx answers counts as no data. Raw load-generator output, server logs,
// summary.md and chart.svg go to bench/results/<date>/.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

var (
	rounds      = flag.Int("rounds", 5, "rounds per server and scenario")
	duration    = flag.Duration("duration", 5*time.Second, "load duration per measurement")
	warmup      = flag.Duration("warmup", 2*time.Second, "warm-up load after each start (YJIT compiles for longer)")
	onlyServers = flag.String("servers", strings.Join(serverNames(), ","), "servers, comma-separated")
	onlyScen    = flag.String("scenarios", strings.Join(scenarioNames(), ","), "scenarios, comma-separated")
	variantEnv  = flag.String("ruvoy-env", "", "also run ruvoy with these VAR=VALUE settings (space-separated), as server ruvoy-env")
)

func main() {
	flag.Parse()
	root, err := filepath.Abs(".")
	check(err)
	servers := withPeers(pick(*onlyServers, serverByName))
	if *variantEnv != "" {
		servers = append(servers, ruvoyWithEnv(*variantEnv))
	}
	scens := pick(*onlyScen, scenarioByName)
	started := time.Now()
	out := filepath.Join(root, "bench", "results", started.Format("2006-01-02T150405"))
	check(os.MkdirAll(out, 0o755))
	check(buildBlockingExt(root, out))
	for _, suite := range rootSuites() {
		check(roots[suite].prepare(root))
	}
	run := &runner{root: root, out: out, started: started, results: map[key][]sample{},
		restRSS: map[string][]float64{}, thinWraps: map[string]string{}, yjitMem: map[string][]yjitProc{}}
	run.cert, run.key = selfSignedCert(out)
	machine := describeMachine()
	fmt.Printf("%s\n%s%s%d rounds of %s, server order rotated each round; raw output in %s\n\n%s\n\n",
		machine, rootsNote(), peersNote(servers), *rounds, *duration, out, judgement)
	for r := 0; r < *rounds; r++ {
		for i := range servers {
			run.round(r, servers[(i+r)%len(servers)], scens)
		}
	}
	runAtExit()
	summary := run.summary(machine, servers, scens)
	fmt.Print("\n" + summary)
	check(os.WriteFile(filepath.Join(out, "summary.md"), []byte(summary), 0o644))
	check(os.WriteFile(filepath.Join(out, "chart.svg"), []byte(run.chart(servers, scens)), 0o644))
	if svg := run.sweepChart(servers, scens); svg != "" {
		check(os.WriteFile(filepath.Join(out, "sweep.svg"), []byte(svg), 0o644))
	}
}

// describeMachine names what the figures depend on.
func describeMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(line[strings.Index(line, ":")+1:])
				break
			}
		}
	}
	cmd := func(name string, args ...string) string {
		out, _ := exec.Command(name, args...).CombinedOutput()
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	rev := cmd("git", "rev-parse", "--short", "HEAD")
	return fmt.Sprintf("Machine: %s, %d CPUs, %s; %s; %s; %s; ruvoy at %s. Load generators (wrk, h2load, a Go client) run on the same host.",
		model, runtime.NumCPU(), cmd("uname", "-sr"), cmd("ruby", "-v"), runtime.Version(), cmd("h2load", "--version"), rev)
}

// buildBlockingExt builds test/ext/blocking for the block50 fixtures in
// the run's results directory and points RUVOY_TEST_EXT (inherited by
// every server) at it.
func buildBlockingExt(root, out string) error {
	dir := filepath.Join(out, "blocking-ext")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"extconf.rb", "blocking.c"} {
		b, err := os.ReadFile(filepath.Join(root, "test", "ext", "blocking", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"ruby", "extconf.rb"}, {"make"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the blocking extension: %s: %v\n%s", args, err, out)
		}
	}
	return os.Setenv("RUVOY_TEST_EXT", dir)
}

func pick[T any](list string, byName func(string) (T, bool)) []T {
	var out []T
	for _, name := range strings.Split(list, ",") {
		v, ok := byName(strings.TrimSpace(name))
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown name %q\n", name)
			os.Exit(2)
		}
		out = append(out, v)
	}
	return out
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		runAtExit()
		os.Exit(1)
	}
}
