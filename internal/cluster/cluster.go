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

	"github.com/ruvoy/ruvoy/internal/wire"
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
	Rackup         string        `json:"rackup"`
	Environment    string        `json:"environment"`
	Upstreams      string        `json:"upstreams"` // the upstreams the app may call, comma-separated
}

// StatsEvery is how often a worker reports its figures, whatever its app
// does: a worker silent for long is taken for stopped.
const StatsEvery = 500 * time.Millisecond

// Stats is what a worker reports (wire.WorkerStats): its VM's figures,
// its hold detector's count and its resident memory.
type Stats struct {
	Busy, LoopLag, HeldFor      time.Duration
	HeldStream                  uint64
	Requests, Fibers            int
	ResponseBytes               int64
	GCCount                     uint64
	GCTime                      time.Duration
	HeapLiveSlots               uint64
	OffloadBusy, OffloadWaiting int
	Hijacked                    int    // connections its app took over
	Holds                       int64  // its VM thread held past HoldWarn, so far
	RSS                         uint64 // bytes
}

// Append appends the figures as a wire.WorkerStats payload.
func (s Stats) Append(b []byte) []byte {
	return wire.AppendStats(b, [wire.WorkerStatsCount]uint64{
		uint64(s.Busy), uint64(s.LoopLag), uint64(s.HeldFor), s.HeldStream,
		uint64(s.Requests), uint64(s.Fibers), uint64(s.ResponseBytes),
		s.GCCount, uint64(s.GCTime), s.HeapLiveSlots,
		uint64(s.OffloadBusy), uint64(s.OffloadWaiting), uint64(s.Hijacked), uint64(s.Holds), s.RSS,
	})
}

// ReadStats reads what Append laid out.
func ReadStats(p []byte) (Stats, bool) {
	v, ok := wire.ReadStats(p)
	if !ok {
		return Stats{}, false
	}
	return Stats{
		Busy: time.Duration(v[0]), LoopLag: time.Duration(v[1]), HeldFor: time.Duration(v[2]), HeldStream: v[3],
		Requests: int(v[4]), Fibers: int(v[5]), ResponseBytes: int64(v[6]),
		GCCount: v[7], GCTime: time.Duration(v[8]), HeapLiveSlots: v[9],
		OffloadBusy: int(v[10]), OffloadWaiting: int(v[11]), Hijacked: int(v[12]), Holds: int64(v[13]), RSS: v[14],
	}, true
}

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
