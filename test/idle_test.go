package test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An idle server sleeps: once requests stop, its stall detector looks
// every 250 ms instead of every 25, and a worker's held watch waits for the
// next request instead of looking every few milliseconds (watchdog.go,
// internal/vm/rv_held.c). Counted as voluntary context switches of the process's threads over 3
// s of idleness: about 40-50 a second here, where the builds before made 300
// (one process) and 370 (a worker); the bound, 150 a second, leaves room
// for a busy machine. A single process's Go sysmon naps 10 ms at a time
// at rest, as ruvoy starts it (cmd/ruvoy/sysmon.go): up to 100 more a
// second, 125-175 in all here; RUVOY_SYSMON_AWAKE=0 lets it sleep.
func TestIdleServerSleeps(t *testing.T) {
	for _, mode := range []struct {
		name  string
		env   []string
		args  []string
		bound int // switches a second
	}{
		{"process", []string{"RUVOY_SYSMON_AWAKE=0"}, nil, 150},
		{"process, sysmon awake", nil, nil, 150 + 100},
		{"worker", nil, []string{"-w", "1"}, 150},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := startEnv(t, mode.env, append(mode.args, app("core.ru"))...)
			s.get(t, "/")
			time.Sleep(2500 * time.Millisecond) // the detector turns quiet after a second
			pid := s.cmd.Process.Pid
			if len(mode.args) > 0 {
				pids := workerPids(t, s)
				if len(pids) != 1 {
					t.Fatalf("%d workers, want 1", len(pids))
				}
				pid = pids[0]
			}
			before := switches(t, pid)
			time.Sleep(3 * time.Second)
			if n := switches(t, pid) - before; n > 3*mode.bound {
				t.Fatalf("the idle process's threads switched %d times in 3 s, want under %d", n, 3*mode.bound)
			} else {
				t.Logf("%d switches in 3 s", n)
			}
		})
	}
}

// switches is the voluntary context switches of a process's threads so
// far: its own sleeps and waits. The involuntary ones are the machine's
// load preempting it (a race build on a busy machine: 774 in 3 s once).
func switches(t *testing.T, pid int) int {
	t.Helper()
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if name, v, ok := strings.Cut(line, ":"); ok && name == "voluntary_ctxt_switches" {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
			}
		}
	}
	if total == 0 {
		t.Fatalf("no context switches read for pid %d", pid)
	}
	return total
}
