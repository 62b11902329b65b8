// Command footprint measures the memory a server's processes hold at
// rest, after a warm-up: the footprint (the distinct physical pages of the
// whole process group, from /proc/PID/pagemap: a page shared by several
// of its processes counts once, as the machine pays for it) and each
// process's PSS. Servers run one at a time, in alternating rounds;
// medians are printed. Reading physical page numbers needs root.
//
//	go run ./bench/footprint [-r ROUNDS] [-p PATH] [-rest SECONDS] NAME='COMMAND' ...
//
// COMMAND is run by bash with PORT set and must serve PATH on
// 127.0.0.1:$PORT; e.g., in examples/rails made ready as bench/rails.go
// does (docs/cluster-memory.md):
//
//	go run ./bench/footprint -p /articles/1.json \
//	  ruvoy='ruvoy -p $PORT -w 2 config.ru' preload='ruvoy -p $PORT -w 2 --preload config.ru' \
//	  puma='puma -w 2 -t 5 --preload -b tcp://127.0.0.1:$PORT config.ru'
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	rounds := flag.Int("r", 3, "rounds")
	path := flag.String("p", "/", "the path to warm up on")
	rest := flag.Int("rest", 15, "seconds of rest between the warm-up and the measurement")
	flag.Parse()
	if flag.NArg() == 0 || os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "usage (as root): go run ./bench/footprint [-r N] [-p PATH] NAME='COMMAND' ...")
		os.Exit(2)
	}
	type entry struct{ name, command string }
	var servers []entry
	for _, a := range flag.Args() {
		name, command, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "footprint: want NAME='COMMAND', got %q\n", a)
			os.Exit(2)
		}
		servers = append(servers, entry{name, command})
	}
	results := map[string][]float64{}
	for r := range *rounds {
		for _, s := range servers {
			mib, detail, err := measure(s.command, *path, time.Duration(*rest)*time.Second)
			if err != nil {
				fmt.Fprintf(os.Stderr, "footprint: %s: %v\n", s.name, err)
				os.Exit(1)
			}
			results[s.name] = append(results[s.name], mib)
			fmt.Printf("round %d  %-12s footprint %6.1f MiB  PSS %s\n", r+1, s.name, mib, detail)
		}
	}
	fmt.Println()
	for _, s := range servers {
		v := slices.Clone(results[s.name])
		slices.Sort(v)
		fmt.Printf("%-12s footprint, median of %d: %6.1f MiB\n", s.name, len(v), v[len(v)/2])
	}
}

// measure starts command, warms it up, lets it rest, and reads its
// process group's footprint (MiB) and each process's PSS.
func measure(command, path string, rest time.Duration) (float64, string, error) {
	port := freePort()
	cmd := exec.Command("bash", "-c", "exec "+command)
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	url := "http://127.0.0.1:" + port + path
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return 0, "", fmt.Errorf("%s did not answer 200 in 2 minutes", url)
		}
	}
	if out, err := exec.Command("wrk", "-t1", "-c20", "-d3s", url).CombinedOutput(); err != nil {
		return 0, "", fmt.Errorf("wrk: %v: %s", err, out)
	}
	time.Sleep(rest)
	pages := map[uint64]bool{}
	var detail []string
	for _, pid := range group(cmd.Process.Pid) {
		pss, err := addPages(pid, pages)
		if err != nil {
			continue // it exited meanwhile
		}
		detail = append(detail, fmt.Sprintf("%.1f", float64(pss)/1024))
	}
	return float64(len(pages)) * float64(os.Getpagesize()) / (1 << 20), strings.Join(detail, " + "), nil
}

// group is the processes of process group pgid.
func group(pgid int) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b[i+2:])) // state ppid pgrp ...
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// addPages adds the physical pages pid has mapped to pages and returns
// its PSS in KiB.
func addPages(pid int, pages map[uint64]bool) (int, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	maps, err := os.ReadFile(dir + "/maps")
	if err != nil {
		return 0, err
	}
	pm, err := os.Open(dir + "/pagemap")
	if err != nil {
		return 0, err
	}
	defer pm.Close()
	size := uint64(os.Getpagesize())
	const chunk = 1 << 16 // pages read at a time
	buf := make([]byte, chunk*8)
	for _, line := range strings.Split(string(maps), "\n") {
		from, to, ok := strings.Cut(strings.Fields(line + " x")[0], "-")
		if !ok {
			continue
		}
		a, _ := strconv.ParseUint(from, 16, 64)
		b, _ := strconv.ParseUint(to, 16, 64)
		for page := a / size; page < b/size; page += chunk {
			n, _ := pm.ReadAt(buf[:min(chunk, b/size-page)*8], int64(page*8))
			for i := 0; i+8 <= n; i += 8 {
				if e := binary.LittleEndian.Uint64(buf[i:]); e>>63 == 1 { // present
					pages[e&(1<<55-1)] = true
				}
			}
		}
	}
	rollup, err := os.ReadFile(dir + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(rollup), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kib, _ := strconv.Atoi(strings.Fields(rest)[0])
			return kib, nil
		}
	}
	return 0, nil
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
