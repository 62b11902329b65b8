package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// usage is what a server's process group used during one measurement.
type usage struct {
	cpuPct  float64 // CPU time over wall time, all processes (200% = both cores)
	maxRSS  float64 // MiB, the group's largest total resident set
	pss     float64 // MiB, the group's proportional set size as the load ends
	vmNanos int64   // CPU time of the ruvoy-vm thread (0: not a ruvoy)
}

// sampler watches a process group every 200 ms until stopped.
type sampler struct {
	pgid  int
	stop  chan struct{}
	done  sync.WaitGroup
	began time.Time
	cpu0  float64
	vm0   int64
	rss   float64
}

const clockTicks = 100 // USER_HZ on Linux

func startSampler(pgid int) *sampler {
	s := &sampler{pgid: pgid, stop: make(chan struct{}), began: time.Now()}
	s.cpu0, s.rss = groupStat(pgid)
	s.vm0 = vmThreadNanos(pgid)
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if _, rss := groupStat(pgid); rss > s.rss {
					s.rss = rss
				}
			}
		}
	}()
	return s
}

func (s *sampler) finish() usage {
	close(s.stop)
	s.done.Wait()
	cpu, rss := groupStat(s.pgid)
	if rss > s.rss {
		s.rss = rss
	}
	u := usage{cpuPct: (cpu - s.cpu0) / time.Since(s.began).Seconds() * 100, maxRSS: s.rss, pss: groupPSS(s.pgid)}
	if s.vm0 > 0 {
		u.vmNanos = vmThreadNanos(s.pgid) - s.vm0
	}
	return u
}

// rootWrapper is the process a server started in a Debian root runs
// under (unshare, waiting for it: roots.go); left out of the figures.
const rootWrapper = "unshare"

// groupStat sums CPU seconds and resident MiB over the processes of a group.
func groupStat(pgid int) (cpuSeconds, rssMiB float64) {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		f := statFields(p)
		if len(f) < 24 || f[4] != strconv.Itoa(pgid) || f[1] == rootWrapper {
			continue
		}
		utime, _ := strconv.ParseFloat(f[13], 64)
		stime, _ := strconv.ParseFloat(f[14], 64)
		pages, _ := strconv.ParseFloat(f[23], 64)
		cpuSeconds += (utime + stime) / clockTicks
		rssMiB += pages * float64(os.Getpagesize()) / (1 << 20)
	}
	return
}

// groupPSS sums the proportional set size over the processes of a group
// (smaps_rollup): pages shared between a server's processes (a preloaded
// app's, the binary's) count once in all, where RSS counts them in each.
func groupPSS(pgid int) (mib float64) {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		f := statFields(p)
		if len(f) < 5 || f[4] != strconv.Itoa(pgid) || f[1] == rootWrapper {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "smaps_rollup"))
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				mib += kb / 1024
				break
			}
		}
	}
	return mib
}

// statFields splits /proc/.../stat, whose second field (the command, in
// parentheses) may hold spaces; that field comes without them.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	start, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if start < 0 || end < start {
		return nil
	}
	return append([]string{s[:strings.IndexByte(s, ' ')], s[start+1 : end]}, strings.Fields(s[end+1:])...)
}

// vmThreadNanos is the CPU time (from schedstat, in ns) of the thread named
// ruvoy-vm in any process of the group.
func vmThreadNanos(pgid int) int64 {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		f := statFields(p)
		if len(f) < 5 || f[4] != strconv.Itoa(pgid) {
			continue
		}
		tasks, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "task", "*"))
		for _, t := range tasks {
			comm, _ := os.ReadFile(filepath.Join(t, "comm"))
			if strings.TrimSpace(string(comm)) != "ruvoy-vm" {
				continue
			}
			st, _ := os.ReadFile(filepath.Join(t, "schedstat"))
			if fs := strings.Fields(string(st)); len(fs) > 0 {
				ns, _ := strconv.ParseInt(fs[0], 10, 64)
				return ns
			}
		}
	}
	return 0
}
