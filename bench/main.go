// Command bench runs wrk against ruvoy and its peers, side by side in one
// run, and prints medians and ratios:
//
//	go run ./bench [-rounds 5] [-duration 5s] [-connections 100]
//
// Every round starts each server afresh (order rotated each round), warms it
// up, then measures. A round with socket errors or non-2xx answers counts as
// no data for that server.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type peer struct {
	name string
	cmd  func(port string) *exec.Cmd
}

type result struct {
	rps, p99ms float64
	ok         bool
	note       string
}

var (
	rounds      = flag.Int("rounds", 5, "rounds per server")
	duration    = flag.Duration("duration", 5*time.Second, "wrk duration per round")
	connections = flag.Int("connections", 100, "wrk connections")
	only        = flag.String("servers", "ruvoy,puma-5,puma-100", "servers to run, comma-separated")
)

func main() {
	flag.Parse()
	root, _ := filepath.Abs(".")
	hello := filepath.Join(root, "examples/hello/config.ru")
	bin := filepath.Join(root, "ruvoy")
	peers := map[string]peer{
		"ruvoy": {"ruvoy", func(port string) *exec.Cmd {
			return exec.Command(bin, "-e", "production", "-p", port, hello)
		}},
		"puma-5": {"puma -t 5 (single mode)", func(port string) *exec.Cmd {
			return exec.Command("puma", "-e", "production", "-t", "5:5", "-b", "tcp://127.0.0.1:"+port, hello)
		}},
		"puma-100": {"puma -t 100 (single mode)", func(port string) *exec.Cmd {
			return exec.Command("puma", "-e", "production", "-t", "100:100", "-b", "tcp://127.0.0.1:"+port, hello)
		}},
	}
	names := strings.Split(*only, ",")
	results := map[string][]result{}
	fmt.Printf("no-op app (examples/hello), wrk -t1 -c%d -d%v, %d rounds, server order rotated each round\n",
		*connections, *duration, *rounds)
	for r := 0; r < *rounds; r++ {
		for i := range names {
			name := names[(i+r)%len(names)]
			p, ok := peers[name]
			if !ok {
				fmt.Fprintf(os.Stderr, "unknown server %q\n", name)
				os.Exit(2)
			}
			res := measure(p)
			fmt.Printf("round %d  %-28s %9.0f req/s  p99 %7.2f ms  %s\n", r+1, p.name, res.rps, res.p99ms, res.note)
			results[name] = append(results[name], res)
		}
	}
	fmt.Println()
	fmt.Printf("%-28s %12s %8s %12s\n", "server", "median req/s", "rsd", "median p99")
	med := map[string][2]float64{}
	for _, name := range names {
		var rps, p99 []float64
		for _, r := range results[name] {
			if r.ok {
				rps = append(rps, r.rps)
				p99 = append(p99, r.p99ms)
			}
		}
		if len(rps) == 0 {
			fmt.Printf("%-28s %12s\n", peers[name].name, "no data")
			continue
		}
		med[name] = [2]float64{median(rps), median(p99)}
		fmt.Printf("%-28s %12.0f %7.1f%% %9.2f ms\n", peers[name].name, median(rps), rsd(rps)*100, median(p99))
	}
	if r, ok := med["ruvoy"]; ok {
		fmt.Println()
		for _, name := range names {
			if m, ok := med[name]; ok && name != "ruvoy" {
				fmt.Printf("ruvoy / %-20s throughput %.2fx, p99 %.2fx\n", peers[name].name, r[0]/m[0], r[1]/m[1])
			}
		}
	}
}

func measure(p peer) result {
	port := freePort()
	cmd := p.cmd(port)
	cmd.Env = append(os.Environ(), "RACK_ENV=production")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return result{note: err.Error()}
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	url := "http://127.0.0.1:" + port + "/"
	if !waitListening("127.0.0.1:" + port) {
		return result{note: "did not start"}
	}
	wrk(url, 2*time.Second) // warm-up
	out := wrk(url, *duration)
	return parseWrk(out)
}

func wrk(url string, d time.Duration) string {
	out, _ := exec.Command("wrk", "-t1", fmt.Sprintf("-c%d", *connections),
		fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency", url).CombinedOutput()
	return string(out)
}

var (
	rpsRe    = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	p99Re    = regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`)
	errorsRe = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	non2xxRe = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

func parseWrk(out string) result {
	var r result
	if m := rpsRe.FindStringSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := p99Re.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		switch m[2] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		r.p99ms = v
	}
	r.ok = r.rps > 0
	if m := errorsRe.FindStringSubmatch(out); m != nil {
		r.ok = false
		r.note = "socket errors: " + strings.Join(m[1:], "/")
	}
	if m := non2xxRe.FindStringSubmatch(out); m != nil {
		r.ok = false
		r.note += " non-2xx: " + m[1]
	}
	if !r.ok && r.note == "" {
		r.note = "no result: " + firstLine(out)
	}
	return r
}

func firstLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Scan()
	return sc.Text()
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
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

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rsd is the relative standard deviation.
func rsd(v []float64) float64 {
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq/float64(len(v))) / mean
}
