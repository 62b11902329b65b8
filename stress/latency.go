package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// latencies keeps every probe's answer time by phase, so that a slow
// control answer can be told apart: the VM thread held (the control probe
// is slow, the admin probe, answered by Go alone in the same process, is
// not), the whole process starved of CPU (both slow), or the harness
// itself starved (its own timer late).
type latencies struct {
	mu     sync.Mutex
	phase  string
	began  time.Time
	took   map[string]time.Duration
	phases []string                              // in the order first seen
	by     map[string]map[string][]time.Duration // phase -> probe -> samples
	slow   []string                              // control answers over slowControl, with when
	sched  map[string][2]time.Duration           // phase -> the VM thread's CPU time and run-queue wait
	vmTask string                                // /proc/PID/task/TID of the VM thread
	last   [2]time.Duration
}

const slowControl = 50 * time.Millisecond

// setPhase starts a phase, closing the last one's account of the VM
// thread's time: running, and runnable but waiting for a CPU (schedstat).
func (l *latencies) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.vmSched()
	if l.sched == nil {
		l.sched = map[string][2]time.Duration{}
	}
	if l.took == nil {
		l.took = map[string]time.Duration{}
	}
	if l.phase != "" {
		l.took[l.phase] = time.Since(l.began)
		l.sched[l.phase] = [2]time.Duration{now[0] - l.last[0], now[1] - l.last[1]}
	}
	l.last = now
	l.phase = p
	l.began = time.Now()
}

func (l *latencies) vmSched() (t [2]time.Duration) {
	b, err := os.ReadFile(l.vmTask + "/schedstat")
	if err == nil {
		var run, wait int64
		fmt.Sscan(string(b), &run, &wait)
		t = [2]time.Duration{time.Duration(run), time.Duration(wait)}
	}
	return t
}

// findVMThread finds the thread named ruvoy-vm.
func (l *latencies) findVMThread(pid int) {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		task := fmt.Sprintf("/proc/%d/task/%s", pid, e.Name())
		if comm, _ := os.ReadFile(task + "/comm"); strings.TrimSpace(string(comm)) == "ruvoy-vm" {
			l.vmTask = task
		}
	}
}

func (l *latencies) add(probe string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]map[string][]time.Duration{}
	}
	m := l.by[l.phase]
	if m == nil {
		m = map[string][]time.Duration{}
		l.by[l.phase] = m
		l.phases = append(l.phases, l.phase)
	}
	m[probe] = append(m[probe], d)
	if probe == "control" && d > slowControl && len(l.slow) < 50 {
		l.slow = append(l.slow, fmt.Sprintf("%s %s: control %v", time.Now().UTC().Format("15:04:05.000"), l.phase,
			d.Round(time.Millisecond)))
	}
}

// probeAdmin asks the admin API (Go only, no VM) every 100 ms, reads the
// VM loop's lag (how late its 250 ms tick ran: how long its turns take),
// and times how late the harness's own 1 ms sleep wakes.
func (h *harness) probeAdmin(ctx context.Context) {
	c := newClient(false, 1)
	defer c.CloseIdleConnections()
	everyTick(ctx, func() {
		began := time.Now()
		time.Sleep(time.Millisecond)
		h.lat.add("harness lag", time.Since(began)-time.Millisecond)
		began = time.Now()
		if _, err := call(c, "GET", h.adm+"/config/", nil); err == nil {
			h.lat.add("admin (Go)", time.Since(began))
		}
		if v := h.metric("ruvoy_vm_loop_lag_seconds"); v >= 0 {
			h.lat.add("VM loop lag", time.Duration(v*1e9))
		}
	})
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(float64(len(s)-1)*p)]
}

func (l *latencies) print() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Println()
	fmt.Println("| phase | probe | n | p50 | p99 | max | over 50 ms |")
	fmt.Println("|---|---|---|---|---|---|---|")
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	for _, ph := range l.phases {
		for _, probe := range []string{"control", "admin (Go)", "VM loop lag", "harness lag"} {
			s := slices.Clone(l.by[ph][probe])
			slices.Sort(s)
			over := 0
			for _, d := range s {
				if d > slowControl {
					over++
				}
			}
			if len(s) > 0 {
				fmt.Printf("| %s | %s | %d | %s | %s | %s | %d |\n", ph, probe, len(s), r(pct(s, .5)), r(pct(s, .99)), r(s[len(s)-1]), over)
			}
		}
	}
	fmt.Println()
	fmt.Println("| phase | wall | VM thread running | VM thread runnable, waiting for a CPU |")
	fmt.Println("|---|---|---|---|")
	for _, ph := range l.phases {
		if w := l.took[ph]; w > 0 {
			st := l.sched[ph]
			fmt.Printf("| %s | %s | %.0f%% | %.0f%% |\n", ph, w.Round(time.Second), 100*st[0].Seconds()/w.Seconds(),
				100*st[1].Seconds()/w.Seconds())
		}
	}
	if len(l.slow) > 0 {
		fmt.Println("control answers over 50 ms (the first 50):")
		for _, s := range l.slow {
			fmt.Println("  " + s)
		}
	}
}
