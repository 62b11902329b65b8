package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// WATCHDOG_USEC is the watchdog's only when WATCHDOG_PID is unset or
// names this process, as sd_watchdog_enabled(3) reads them.
func TestWatchdogInterval(t *testing.T) {
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"x", "", 0},
		{"-5", "", 0},
		{"3000000", "", 3 * time.Second},
		{"3000000", "42", 3 * time.Second},
		{"3000000", "43", 0},
		{"9223372036854775807", "", 0}, // past a Duration
	} {
		if got := watchdogInterval(c.usec, c.pid, 42); got != c.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, want %v", c.usec, c.pid, got, c.want)
		}
	}
}

// A VM answers unless Ruby code has held its thread past the limit; in
// cluster mode every worker serving a slot, which must also have reported.
func TestAnswering(t *testing.T) {
	limit := 5 * time.Second
	var one serve.Figures
	if ok, _ := answering(one, limit); !ok {
		t.Fatal("an idle VM does not answer")
	}
	one.VM.HeldFor = 6 * time.Second
	if ok, why := answering(one, limit); ok || why != "Ruby code has held the VM thread for 6s" {
		t.Fatalf("a held VM: %v %q", ok, why)
	}
	workers := serve.Figures{VM: one.VM, Workers: []serve.WorkerFigures{{Up: true}, {Up: true}}}
	if ok, _ := answering(workers, limit); !ok {
		t.Fatal("in cluster mode the front end's figures count, not the summed VM's") // no VM of its own
	}
	workers.Workers[1].HeldFor = 6 * time.Second
	if ok, why := answering(workers, limit); ok || why != "Ruby code has held worker 1's VM thread for 6s" {
		t.Fatalf("a held worker: %v %q", ok, why)
	}
	workers.Workers[1] = serve.WorkerFigures{Up: true, Silence: 6 * time.Second}
	if ok, why := answering(workers, limit); ok || why != "worker 1 has not reported for 6s" {
		t.Fatalf("a silent worker: %v %q", ok, why)
	}
	workers.Workers[1] = serve.WorkerFigures{Silence: time.Minute} // restarting: the pool's business
	if ok, _ := answering(workers, limit); !ok {
		t.Fatal("a slot whose worker restarts stopped the pings")
	}
	workers.Workers[1] = serve.WorkerFigures{Up: true, Silence: 1500 * time.Millisecond}
	if ok, _ := answering(workers, time.Second); !ok {
		t.Fatal("a worker silent for less than its reports' slack stopped the pings")
	}
}

// The STATUS a person reads: what serves, the requests in flight, and
// why the watchdog's pings stopped.
func TestStatusLine(t *testing.T) {
	n := &sdNotify{rackup: "config.ru"}
	one := serve.Figures{InFlight: 1}
	for _, c := range []struct {
		f    serve.Figures
		why  string
		want string
	}{
		{one, "", "serving config.ru: one process, 1 request in flight"},
		{serve.Figures{InFlight: 3, Queued: 2}, "", "serving config.ru: one process, 3 requests in flight, 2 waiting"},
		{serve.Figures{Workers: make([]serve.WorkerFigures, 2), Serving: 2}, "", "serving config.ru: 2 workers, 0 requests in flight"},
		{serve.Figures{Workers: make([]serve.WorkerFigures, 2), Serving: 1, InFlight: 2}, "", "serving config.ru: 1 of 2 workers, 2 requests in flight"},
		{one, "worker 1 has not reported for 6s", "serving config.ru: one process, 1 request in flight; watchdog pings stopped: worker 1 has not reported for 6s"},
	} {
		if got := n.statusLine(c.f, c.why); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
	n.note = "; the last reload failed (see the log)"
	if got := n.statusLine(one, ""); got != "serving config.ru: one process, 1 request in flight; the last reload failed (see the log)" {
		t.Errorf("after a failed reload: %q", got)
	}
	n.reload = "reloading config.ru (SIGHUP)"
	if got := n.statusLine(one, ""); got != n.reload {
		t.Errorf("reloading: %q", got)
	}
	n.stopSig = "SIGTERM"
	if got := n.statusLine(serve.Figures{InFlight: 2}, ""); got != "stopping (SIGTERM): 2 requests in flight" {
		t.Errorf("stopping: %q", got)
	}
}

// Without NOTIFY_SOCKET nothing is made, nor changed; with it, systemd's variables
// leave the environment (the workers and the app's children inherit
// it), and a reload says RELOADING=1 with MONOTONIC_USEC in one datagram.
func TestSDNotify(t *testing.T) {
	env := map[string]string{watchdogUsecEnv: "5000000"}
	t.Setenv(watchdogUsecEnv, "5000000")
	if n := newSDNotify(nil, "config.ru", func(k string) string { return env[k] }); n != nil {
		t.Fatal("a notifier without NOTIFY_SOCKET")
	}
	if os.Getenv(watchdogUsecEnv) != "5000000" {
		t.Fatal("without NOTIFY_SOCKET the environment changed")
	}
	var none *sdNotify
	none.booting(2) // a nil one does nothing
	none.reloading("SIGHUP", true)

	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for k, v := range map[string]string{notifySocketEnv: path, watchdogUsecEnv: "4000000", watchdogPIDEnv: strconv.Itoa(os.Getpid())} {
		env[k] = v
		t.Setenv(k, v)
	}
	n := newSDNotify(nil, "config.ru", func(k string) string { return env[k] })
	if n == nil || n.watchdog != 4*time.Second {
		t.Fatalf("the notifier: %+v", n)
	}
	for _, k := range []string{notifySocketEnv, watchdogUsecEnv, watchdogPIDEnv} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s is still in the environment", k, v)
		}
	}
	before := monotonicUsec()
	n.reloading("SIGHUP", true)
	buf := make([]byte, 1024)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(buf[:k]), "\n")
	if len(lines) != 3 || lines[0] != "RELOADING=1" || lines[2] != "STATUS=reloading config.ru (SIGHUP): booting new workers" {
		t.Fatalf("the reload's message: %q", lines)
	}
	mono, err := strconv.ParseUint(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil || mono < before || mono > monotonicUsec() {
		t.Fatalf("MONOTONIC_USEC: %q (from %d)", lines[1], before)
	}
}
