// Command bench runs ruvoy and its peers side by side in one run and prints
// medians and ratios per scenario:
//
//	go run ./bench [-rounds 5] [-duration 5s] [-servers ruvoy,puma-5,puma-100] [-scenarios noop,ttfb,upload]
//
// Each round starts every server afresh, in an order rotated every round,
// warms it up, and measures each scenario. A measurement with socket errors
// or non-2xx answers counts as no data. Raw load-generator output and a
// summary.md go to bench/results/<date>/.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	rounds      = flag.Int("rounds", 5, "rounds per server and scenario")
	duration    = flag.Duration("duration", 5*time.Second, "load duration per measurement")
	onlyServers = flag.String("servers", "ruvoy,puma-5,puma-100", "servers, comma-separated: "+strings.Join(serverNames(), ","))
	onlyScen    = flag.String("scenarios", "noop,ttfb,upload,wait50,block50,block50-offload,rails-json",
		"scenarios, comma-separated: "+strings.Join(scenarioNames(), ","))
)

func main() {
	flag.Parse()
	root, err := filepath.Abs(".")
	check(err)
	servers := pick(*onlyServers, serverByName)
	scens := pick(*onlyScen, scenarioByName)
	out := filepath.Join(root, "bench", "results", time.Now().Format("2006-01-02T150405"))
	check(os.MkdirAll(out, 0o755))
	check(buildBlockingExt(root))
	run := &runner{root: root, out: out, results: map[key][]sample{}}

	fmt.Printf("%d rounds, server order rotated each round; raw output in %s\n", *rounds, out)
	for r := 0; r < *rounds; r++ {
		for i := range servers {
			srv := servers[(i+r)%len(servers)]
			run.round(r, srv, scens)
		}
	}
	summary := run.summary(servers, scens)
	fmt.Print("\n" + summary)
	check(os.WriteFile(filepath.Join(out, "summary.md"), []byte(summary), 0o644))
}

// buildBlockingExt builds test/ext/blocking for the block50 fixtures and
// points RUVOY_TEST_EXT (inherited by every server) at it.
func buildBlockingExt(root string) error {
	dir, err := os.MkdirTemp("", "ruvoy-bench-ext")
	if err != nil {
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
		os.Exit(1)
	}
}
