// Package cluster is what the two sides of cluster mode share: the front
// end (internal/cluster/frontend), which keeps the listeners, admission
// and the clients' connections and runs the worker processes, and a worker
// (internal/cluster/worker), the same binary started again with a VM of
// its own. They speak the wire's messages as frames over a unix socket
// (wire.h, "Workers"); these are the frames of their own: the settings a
// worker gets first, and the figures it reports.
package cluster

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// FDEnv names the environment variable that makes the binary a worker
// process: its value is the descriptor of the socket to the front end;
// the descriptor after it is the worker's urgent socket.
const FDEnv = "RUVOY_WORKER_FD"

// Config is what the front end tells a worker first (wire.WorkerConfig),
// as JSON.
type Config struct {
	Slot           int           `json:"slot"`
	Program        string        `json:"program"`
	Args           []string      `json:"args"`
	ResponseWindow int           `json:"response_window"`
	HoldWarn       time.Duration `json:"hold_warn"`
	HoldLimit      time.Duration `json:"hold_limit"`
	GCWhenIdle     time.Duration `json:"gc_when_idle"`
	Rackup         string        `json:"rackup"`
	Environment    string        `json:"environment"`
	Upstreams      string        `json:"upstreams"` // the upstreams the app may call, comma-separated
}

// StatsEvery is how often a worker reports its figures, whatever its app
// does: a worker silent for long is taken for stopped.
const StatsEvery = 500 * time.Millisecond

// ProcessRSS is a process's resident memory in bytes (0 if unknown).
func ProcessRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	return StatmRSS(b)
}

// StatmRSS reads the resident memory, in bytes, from /proc's statm (its
// second number is in pages).
func StatmRSS(b []byte) uint64 {
	var size, resident uint64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}

// PSS is a process's proportional set size, in bytes (/proc's
// smaps_rollup; 0 if unknown): its private pages, and its share of those
// it shares with others.
func PSS(pid int) uint64 { return procKiB(pid, "smaps_rollup", "Pss:") << 10 }

// PeakRSS is the most resident memory a process had, in bytes (/proc's
// VmHWM; 0 if unknown).
func PeakRSS(pid int) uint64 { return procKiB(pid, "status", "VmHWM:") << 10 }

// procKiB is the number of KiB on the line of /proc/PID/file that starts
// with field (0 if there is none).
func procKiB(pid int, file, field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kib uint64
			fmt.Sscan(rest, &kib)
			return kib
		}
	}
	return 0
}
