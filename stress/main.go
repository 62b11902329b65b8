// Command stress is the mixed-stress and soak harness. Against the real
// binary on loopback it runs cycles of: steady traffic (HTTP/2 no-ops,
// HTTP/1.1 requests that wait 200 ms, 256 KiB uploads), request-count
// overload, request-body overload, deliberately cancelled requests, and
// recovery, while a separate control listener is probed every 100 ms. It
// prints what it saw and exits non-zero when a steady or recovery request
// failed, a transport error occurred, or resources grew across cycles.
//
//	go run ./stress                  # 3 cycles, 15 s overload phases
//	go run ./stress -short -cycles 5 # 5 short cycles (CI)
//	go run ./stress -soak 30         # steady traffic for 30 minutes
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

var (
	cycles = flag.Int("cycles", 3, "full cycles to run")
	phase  = flag.Duration("phase", 15*time.Second, "length of the steady and overload phases")
	short  = flag.Bool("short", false, "short cycles (3 s phases), for CI")
	soak   = flag.Int("soak", 0, "run steady traffic for this many minutes instead of cycles")
	bin    = flag.String("bin", "ruvoy", "the ruvoy binary")
)

func main() {
	flag.Parse()
	if *short {
		*phase = 3 * time.Second
	}
	root, _ := filepath.Abs(".")
	binary, _ := filepath.Abs(*bin)
	h, err := startHarness(root, binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(1)
	}
	defer h.stop()

	var ok bool
	if *soak > 0 {
		ok = h.runSoak(time.Duration(*soak) * time.Minute)
	} else {
		ok = h.runCycles(*cycles)
	}
	if !ok {
		fmt.Println("\nFAIL")
		h.stop()
		os.Exit(1)
	}
	fmt.Println("\nPASS")
	h.stop()
	os.RemoveAll(filepath.Dir(h.logPath)) // kept only when a run fails
}
