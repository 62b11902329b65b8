// Command fuzz is a differential HTTP/1 fuzzer for the real binary. It
// sends well-formed requests, requests broken in ways RFC 9112 forbids,
// and requests with random bytes changed, each followed on the same
// connection by a canary request (and sometimes a half-close), and holds
// every outcome against three invariants, with Go's own request parser as
// the reference for what the bytes are:
//
//  1. an invalid request never gets a 2xx;
//
//  2. the canary after a request that is not one whole valid request never
//     reaches the app (no request desync);
//
//  3. a whole valid request's answer is never lost, and the app saw what
//     the client sent.
//
//     go run ./fuzz -d 10m              # against ./ruvoy serving fuzz/app.ru
//     go run ./fuzz -d 30s -bin ./ruvoy # the short run in make test
//     go run ./fuzz -addr 127.0.0.1:9292 # any server already serving fuzz/app.ru
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/testserver"
)

var (
	duration = flag.Duration("d", 30*time.Second, "how long to fuzz")
	bin      = flag.String("bin", "ruvoy", "the ruvoy binary to start")
	addr     = flag.String("addr", "", "fuzz a server already running here instead")
	workers  = flag.Int("workers", 16, "connections at once")
	seed     = flag.Uint64("seed", 0, "random seed (0: from the clock)")
)

func main() {
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	target := *addr
	var server *exec.Cmd
	if target == "" {
		var err error
		if server, target, err = startServer(*bin); err != nil {
			fmt.Fprintln(os.Stderr, "fuzz:", err)
			os.Exit(1)
		}
		defer server.Process.Signal(syscall.SIGTERM)
	}
	fmt.Printf("fuzzing %s for %v with %d connections, seed %d\n", target, *duration, *workers, *seed)

	var (
		mu       sync.Mutex
		counts   = map[string]int{}
		failures []string
		total    atomic.Int64
	)
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(*seed, uint64(w)))
			client := &http.Client{Timeout: 10 * time.Second}
			for n := 0; time.Now().Before(deadline); n++ {
				c := generate(r, n)
				o, err := send(target, c, 2*time.Second)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("connecting: %v (the server died?)", err))
					mu.Unlock()
					return
				}
				seen, err := canarySeen(client, target, c.id)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("asking the app: %v", err))
					mu.Unlock()
					return
				}
				problems := check(c, withCanary(c), o, seen)
				total.Add(1)
				mu.Lock()
				counts[c.kind+": "+c.mutation]++
				for _, p := range problems {
					failures = append(failures, fmt.Sprintf("%s (%s, %s, half-close %v): %s\n    request %q\n    answers %+v, connection %s",
						c.id, c.kind, c.mutation, c.halfClose, p, c.request, o.answers, o.end))
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()

	var names []string
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Printf("%d cases\n", total.Load())
	for _, k := range names {
		fmt.Printf("  %6d  %s\n", counts[k], k)
	}
	if server != nil {
		if server.ProcessState != nil {
			failures = append(failures, "the server exited during the run")
		} else if err := server.Process.Signal(syscall.Signal(0)); err != nil {
			failures = append(failures, "the server is gone: "+err.Error())
		}
	}
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... and %d more", len(failures)-20))
		}
		fmt.Println("FAIL\n" + strings.Join(failures, "\n"))
		os.Exit(1)
	}
	fmt.Println("PASS")
}

func canarySeen(client *http.Client, target, id string) (bool, error) {
	res, err := client.Get("http://" + target + "/seen?" + canaryPath(id))
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b) == "yes", err
}

// startServer runs the binary on a free port with fuzz/app.ru.
func startServer(binary string) (*exec.Cmd, string, error) {
	port, err := testserver.FreePort()
	if err != nil {
		return nil, "", err
	}
	binary, _ = filepath.Abs(binary)
	rackup, _ := filepath.Abs(filepath.Join("fuzz", "app.ru"))
	cmd := exec.Command(binary, "-p", port, "-e", "production", rackup)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	target := "127.0.0.1:" + port
	if err := testserver.WaitListening(target, 60*time.Second, nil); err != nil {
		cmd.Process.Kill()
		return nil, "", fmt.Errorf("%s: %v", binary, err)
	}
	return cmd, target, nil
}
