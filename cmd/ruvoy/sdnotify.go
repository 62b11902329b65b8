package main

import (
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// systemd's notify protocol (sd_notify(3)) for `ruvoy config.ru`, beyond
// what Caddy sends by itself: READY=1 once a config has loaded (the app
// booted, the listeners up), RELOADING=1 and READY=1 around a config load
// (so a reload in one process), STOPPING=1 as the stop begins. What ruvoy
// adds, only while NOTIFY_SOCKET is set:
//
//   - RELOADING=1 with MONOTONIC_USEC, then READY=1, around every SIGUSR2
//     or SIGHUP reload: a rolling restart in cluster mode loads no config,
//     so Caddy says nothing, and Type=notify-reload takes a RELOADING=1
//     as the answer to its signal only with MONOTONIC_USEC (Caddy's has none);
//   - STATUS= lines a person reads in `systemctl status`, sent when they
//     change, at most every statusEvery;
//   - with WATCHDOG_USEC (and WATCHDOG_PID unset or this process),
//     WATCHDOG=1 every half of it, but only while every VM answers
//     (answering): Ruby code holding a VM thread stops the pings, and
//     systemd restarts the unit, as it does a frozen process.
type sdNotify struct {
	addr     *net.UnixAddr
	watchdog time.Duration // WATCHDOG_USEC; 0: none
	rt       *serve.Runtime
	rackup   string

	failed sync.Once // a send that failed is logged once

	mu       sync.Mutex
	reload   string    // while a reload runs: the status in the serving one's place
	stopSig  string    // the stop has begun, on this signal
	note     string    // added to the serving status (a reload that failed)
	status   string    // the last STATUS sent
	statusAt time.Time // and when
}

// statusEvery bounds how often a changed STATUS is sent (the figures it
// shows change with every request).
const statusEvery = time.Second

// The environment systemd hands the service's main process.
const (
	notifySocketEnv = "NOTIFY_SOCKET"
	watchdogUsecEnv = "WATCHDOG_USEC"
	watchdogPIDEnv  = "WATCHDOG_PID"
)

// newSDNotify is the notifier for a unit whose NOTIFY_SOCKET is set, or
// nil (every method of a nil one does nothing). It takes the variables
// out of the environment, as sd_notify(3)'s unset_environment does: ruvoy
// alone speaks for the unit, not the workers (the same binary, which
// would find them), nor the app or its children. Caddy's notify package
// read NOTIFY_SOCKET as the process began.
func newSDNotify(rt *serve.Runtime, rackup string, getenv func(string) string) *sdNotify {
	path := getenv(notifySocketEnv)
	if path == "" {
		return nil // not under systemd's notify: the environment stays as it is
	}
	watchdog := watchdogInterval(getenv(watchdogUsecEnv), getenv(watchdogPIDEnv), os.Getpid())
	for _, name := range []string{notifySocketEnv, watchdogUsecEnv, watchdogPIDEnv} {
		os.Unsetenv(name)
	}
	return &sdNotify{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, watchdog: watchdog, rt: rt, rackup: rackup}
}

// watchdogInterval is WATCHDOG_USEC as a duration when it is meant for
// pid (WATCHDOG_PID unset or pid), else 0, as sd_watchdog_enabled(3)
// reads them.
func watchdogInterval(usec, pid string, self int) time.Duration {
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 || n > math.MaxInt64/uint64(time.Microsecond) {
		return 0 // none, or past what a Duration holds (no watchdog would wait so long)
	}
	if pid != "" && pid != strconv.Itoa(self) {
		return 0
	}
	return time.Duration(n) * time.Microsecond
}

// send sends one message: lines joined by newlines, one datagram.
func (n *sdNotify) send(lines ...string) {
	if err := n.write(strings.Join(lines, "\n")); err != nil {
		// The server goes on; one line says why systemd hears nothing.
		n.failed.Do(func() {
			caddy.Log().Named("ruvoy").Error("ruvoy: cannot notify systemd", zap.String("socket", n.addr.Name), zap.Error(err))
		})
	}
}

func (n *sdNotify) write(payload string) error {
	c, err := net.DialUnix("unixgram", nil, n.addr) // anew each time: systemd may have re-executed
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(payload))
	return err
}

// booting says what the process is about while the app boots (before
// Caddy's READY=1).
func (n *sdNotify) booting(workers int) {
	if n == nil {
		return
	}
	what := "booting " + n.rackup
	if workers > 0 {
		what += fmt.Sprintf(" in %d workers", workers)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setStatus(what)
}

// serving starts the STATUS updates and the watchdog: the app answers
// (Caddy has sent READY=1).
func (n *sdNotify) serving() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.setStatus(n.statusLine(n.rt.Figures(), ""))
	n.mu.Unlock()
	go n.run()
}

// reloading goes before a reload (sig: the signal that asked for it).
func (n *sdNotify) reloading(sig string, workers bool) {
	if n == nil {
		return
	}
	what := fmt.Sprintf("reloading %s (%s)", n.rackup, sig)
	if workers {
		what += ": booting new workers"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopSig != "" {
		return // a stop has begun: Caddy has sent STOPPING=1
	}
	n.reload, n.note = what, ""
	n.status, n.statusAt = what, time.Now()
	n.send("RELOADING=1", "MONOTONIC_USEC="+strconv.FormatUint(monotonicUsec(), 10), "STATUS="+what)
}

// reloaded goes after it: READY=1 whether it worked or not (a reload that
// failed leaves the app as it was serving), the status saying which.
func (n *sdNotify) reloaded(failed bool) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.reload == "" {
		return // a stop began first
	}
	n.reload = ""
	if failed {
		n.note = "; the last reload failed (see the log)"
	}
	line := n.statusLine(n.rt.Figures(), "")
	n.status, n.statusAt = line, time.Now()
	n.send("READY=1", "STATUS="+line)
}

// stop says the stop has begun (Caddy sends STOPPING=1): the status counts
// the requests it waits for from now on.
func (n *sdNotify) stop(sig string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopSig, n.reload = sig, ""
	n.setStatus(n.statusLine(n.rt.Figures(), ""))
}

// run sends the STATUS when it changes and pings the watchdog, forever.
// It looks every tick (a second, or a quarter interval when shorter):
// the pings come every half interval while every VM answers, and at the
// first look after a hold; so they stop only for a hold longer than half
// the interval, and systemd acts on none shorter than three quarters, on
// every one longer than one and a half (docs/deployment.md).
func (n *sdNotify) run() {
	tick := statusEvery
	if n.watchdog > 0 {
		tick = max(min(tick, n.watchdog/4), 10*time.Millisecond)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var pinged time.Time
	answered := true
	for ; ; <-t.C {
		f := n.rt.Figures()
		why := ""
		if n.watchdog > 0 {
			var ok bool
			ok, why = answering(f, n.watchdog/2)
			// Half a tick's slack: a ticker's beats come a little early or late.
			if ok && (!answered || time.Since(pinged) >= n.watchdog/2-tick/2) {
				n.send("WATCHDOG=1")
				pinged = time.Now()
			}
			answered = ok
		}
		n.mu.Lock()
		if line := n.statusLine(f, why); line != n.status && time.Since(n.statusAt) >= statusEvery {
			n.setStatus(line)
		}
		n.mu.Unlock()
	}
}

// setStatus sends line as the STATUS (under mu).
func (n *sdNotify) setStatus(line string) {
	n.status, n.statusAt = line, time.Now()
	n.send("STATUS=" + line)
}

// statusLine is the STATUS for the figures f (under mu); why, when set,
// is why the watchdog pings stopped.
func (n *sdNotify) statusLine(f serve.Figures, why string) string {
	inFlight := plural(f.InFlight, "request") + " in flight"
	if f.Queued > 0 {
		inFlight += fmt.Sprintf(", %d waiting", f.Queued)
	}
	var line string
	switch {
	case n.stopSig != "":
		line = "stopping (" + n.stopSig + "): " + inFlight
	case n.reload != "":
		line = n.reload
	case len(f.Workers) == 0:
		line = "serving " + n.rackup + ": one process, " + inFlight + n.note
	case f.Serving < len(f.Workers):
		line = fmt.Sprintf("serving %s: %d of %s, %s%s", n.rackup, f.Serving, plural(len(f.Workers), "worker"), inFlight, n.note)
	default:
		line = fmt.Sprintf("serving %s: %s, %s%s", n.rackup, plural(len(f.Workers), "worker"), inFlight, n.note)
	}
	if why != "" {
		line += "; watchdog pings stopped: " + why
	}
	return line
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// answering says whether every VM serving the app answers, and if not,
// why: in one process, the process's VM thread has not been held by Ruby
// code (a request's code that has not yielded) for longer than limit; in
// cluster mode, each worker serving a slot likewise (as it last told),
// and each has reported within max(limit, workerSilence). A slot whose
// worker restarts does not count: the pool fills it, or logs why not.
func answering(f serve.Figures, limit time.Duration) (bool, string) {
	if len(f.Workers) == 0 {
		if f.VM.HeldFor > limit {
			return false, fmt.Sprintf("Ruby code has held the VM thread for %v", f.VM.HeldFor.Round(100*time.Millisecond))
		}
		return true, ""
	}
	for i, w := range f.Workers {
		switch {
		case !w.Up:
		case w.HeldFor > limit:
			return false, fmt.Sprintf("Ruby code has held worker %d's VM thread for %v", i, w.HeldFor.Round(100*time.Millisecond))
		case w.Silence > max(limit, workerSilence):
			return false, fmt.Sprintf("worker %d has not reported for %v", i, w.Silence.Round(100*time.Millisecond))
		}
	}
	return true, ""
}

// workerSilence is the least silence that counts against a worker: it
// reports every 500 ms (cluster.StatsEvery), which a busy machine delays;
// the front end picks a worker last after as long (frontend's silentAfter).
const workerSilence = 2 * time.Second

// monotonicUsec is CLOCK_MONOTONIC in µs, the clock MONOTONIC_USEC is on.
func monotonicUsec() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano() / 1000)
}
