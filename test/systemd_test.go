package test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// systemd's notify protocol, end to end: the server runs with
// NOTIFY_SOCKET naming a unixgram socket the test reads, as systemd's
// own would, and WATCHDOG_USEC set, as WatchdogSec= sets it.
//
// systemd itself is not run: on this machine it is not PID 1 (no
// /run/systemd/system; `systemd-run` answers "System has not been booted
// with systemd as init system"), and its version here (252) predates
// Type=notify-reload (253). What the socket receives is what systemd
// would; docs/deployment.md has the unit these messages are for.

// sdBoot is how long the app sleeps as it boots.
const sdBoot = 3 * time.Second

// sdWatchdog is the WATCHDOG_USEC the tests give (pings every half).
const sdWatchdog = 3 * time.Second

// sdMessage is one datagram the server sent: its KEY=VALUE lines.
type sdMessage struct {
	at     time.Time
	fields map[string]string
}

func (m sdMessage) String() string {
	var keys []string
	for k, v := range m.fields {
		keys = append(keys, k+"="+v)
	}
	return strings.Join(keys, " | ")
}

// sdSocket stands in for systemd's notify socket.
type sdSocket struct {
	path string
	mu   sync.Mutex
	got  []sdMessage
}

func listenSD(t *testing.T) *sdSocket {
	t.Helper()
	s := &sdSocket{path: filepath.Join(t.TempDir(), "notify")}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 8192)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			m := sdMessage{at: time.Now(), fields: map[string]string{}}
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					m.fields[k] = v
				}
			}
			s.mu.Lock()
			s.got = append(s.got, m)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			for i, m := range s.messages() {
				t.Logf("notify %d at %s: %s", i, m.at.Format("15:04:05.000"), m)
			}
		}
	})
	return s
}

func (s *sdSocket) messages() []sdMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdMessage(nil), s.got...)
}

// await waits for the first message from index from on that holds
// key=value (any value when value is ""), and returns its index.
func (s *sdSocket) await(t testing.TB, from int, d time.Duration, key, value string) (int, sdMessage) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := s.messages()
		for i := from; i < len(got); i++ {
			if v, ok := got[i].fields[key]; ok && (value == "" || v == value) {
				return i, got[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: no %s=%s from message %d on", d, key, value, from)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitStatus waits for a STATUS holding want, from index from on.
func (s *sdSocket) awaitStatus(t testing.TB, from int, d time.Duration, want string) (int, sdMessage) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := s.messages()
		for i := from; i < len(got); i++ {
			if strings.Contains(got[i].fields["STATUS"], want) {
				return i, got[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: no STATUS with %q from message %d on", d, want, from)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count is how many messages from index from on hold key=value.
func (s *sdSocket) count(from int, key, value string) int {
	n := 0
	for _, m := range s.messages()[from:] {
		if m.fields[key] == value {
			n++
		}
	}
	return n
}

// pings are the times WATCHDOG=1 came, between a and b.
func (s *sdSocket) pings(a, b time.Time) []time.Time {
	var at []time.Time
	for _, m := range s.messages() {
		if m.fields["WATCHDOG"] == "1" && !m.at.Before(a) && !m.at.After(b) {
			at = append(at, m.at)
		}
	}
	return at
}

// startSystemd launches the app under the socket, with the watchdog on;
// each boot of the app (a process, a worker, a template) leaves a file
// in the returned directory.
func startSystemd(t *testing.T, sd *sdSocket, args ...string) (*server, string) {
	t.Helper()
	booted := t.TempDir()
	port := freePort(t)
	env := []string{"NOTIFY_SOCKET=" + sd.path, "WATCHDOG_USEC=" + strconv.FormatInt(sdWatchdog.Microseconds(), 10),
		"SYSTEMD_BOOT_SLEEP=" + strconv.FormatFloat(sdBoot.Seconds(), 'f', -1, 64), "SYSTEMD_BOOTED=" + booted}
	argv := append(append([]string{"-p", port}, args...), app("systemd.ru"))
	return launchIn(t, "", env, port, argv...), booted
}

// boots is how many times the app has booted.
func boots(t testing.TB, dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// sdReady checks the start: READY=1 once the app has booted in every
// process that runs it (boots of them), and answers, not before; the
// STATUS said it booted, then says it serves.
func sdReady(t *testing.T, s *server, sd *sdSocket, booted string, boots0 int, serving string) int {
	t.Helper()
	began := time.Now()
	i, ready := sd.await(t, 0, 90*time.Second, "READY", "1")
	if n := boots(t, booted); n != boots0 {
		t.Fatalf("READY=1 came when the app had booted %d times, not %d", n, boots0)
	}
	if ready.at.Sub(began) < sdBoot {
		t.Fatalf("READY=1 came %v after the start, within the app's boot of %v", ready.at.Sub(began), sdBoot)
	}
	// Once READY=1 has come, the app answers at once.
	equal(t, "a request right after READY=1", statusAndBody(s.url+"/sleep?s=0"), "200 slept")
	sd.awaitStatus(t, 0, time.Second, "booting apps/systemd.ru")
	j, _ := sd.awaitStatus(t, i, 5*time.Second, serving)
	equal(t, "READY=1 once", sd.count(0, "READY", "1"), 1)
	return j
}

// sdPings checks the watchdog's pings over a few seconds: about every
// half interval, never an interval apart (bounds loose for a busy machine).
func sdPings(t *testing.T, sd *sdSocket) {
	t.Helper()
	from := time.Now()
	time.Sleep(3 * sdWatchdog / 2)
	pings := sd.pings(from.Add(-sdWatchdog), time.Now())
	if len(pings) < 3 {
		t.Fatalf("%d watchdog pings in %v: %v", len(pings), time.Since(from)+sdWatchdog, pings)
	}
	for k := 1; k < len(pings); k++ {
		gap := pings[k].Sub(pings[k-1])
		if gap < sdWatchdog/4 || gap > 5*sdWatchdog/6 {
			t.Fatalf("watchdog pings %v apart (WATCHDOG_USEC %v: every half of it): %v", gap, sdWatchdog, pings)
		}
	}
}

// sdHeld checks that while a request's Ruby holds a VM thread for longer
// than the interval the pings stop, the STATUS says why, and that they
// come again as soon as it ends.
func sdHeld(t *testing.T, s *server, sd *sdSocket, why string) {
	t.Helper()
	const hold = 2 * sdWatchdog
	spun := background(t, func(t testing.TB) response {
		return s.get(t, "/spin?s="+strconv.FormatFloat(hold.Seconds(), 'f', -1, 64))
	})
	_, stopped := sd.awaitStatus(t, 0, 3*hold, "watchdog pings stopped: "+why)
	res := <-spun
	answered := time.Now()
	// When the hold began, from the app's CLOCK_MONOTONIC: a busy
	// machine may start the request late.
	began, err := strconv.ParseInt(strings.TrimPrefix(res.body, "spun "), 10, 64)
	if err != nil {
		t.Fatalf("the held request: %q", res.body)
	}
	start := answered.Add(-time.Duration(int64(monotonicUsec(t))*1000 - began))
	end := start.Add(hold)
	if stopped.at.Before(start) || stopped.at.After(end) {
		t.Fatalf("the STATUS saying the pings stopped came at %s, not during the hold (%s to %s)", stopped.at.Format("15:04:05.000"),
			start.Format("15:04:05.000"), end.Format("15:04:05.000"))
	}
	// From half the interval into the hold (and a second's slack: the
	// front end hears of a worker's hold a moment late) to its end, no ping.
	quiet := start.Add(sdWatchdog/2 + time.Second)
	if p := sd.pings(quiet, end.Add(-100*time.Millisecond)); len(p) > 0 {
		t.Fatalf("watchdog pings while Ruby held the VM thread (from %s to %s): %v", quiet.Format("15:04:05.000"),
			end.Format("15:04:05.000"), p)
	}
	// Then they come again at the next look (a quarter interval).
	eventually(t, 3*sdWatchdog/4, "a watchdog ping after the hold", func() bool { return len(sd.pings(end, time.Now())) > 0 })
}

// sdReload checks a reload on sig: RELOADING=1 with MONOTONIC_USEC (the
// time it was sent, on CLOCK_MONOTONIC), then READY=1 once the app has
// booted again (boots more times).
func sdReload(t *testing.T, s *server, sd *sdSocket, booted string, sig syscall.Signal, more int) {
	t.Helper()
	from := len(sd.messages())
	before := boots(t, booted)
	signalled := monotonicUsec(t)
	s.cmd.Process.Signal(sig)
	i, reloading := sd.await(t, from, 30*time.Second, "RELOADING", "1")
	mono, err := strconv.ParseUint(reloading.fields["MONOTONIC_USEC"], 10, 64)
	if err != nil || mono < signalled || mono > monotonicUsec(t) {
		t.Fatalf("RELOADING=1's MONOTONIC_USEC %q: not between the signal (%d) and now", reloading.fields["MONOTONIC_USEC"], signalled)
	}
	mustContain(t, "the STATUS with RELOADING=1", reloading.fields["STATUS"], "reloading apps/systemd.ru ("+unix.SignalName(sig)+")")
	j, ready := sd.await(t, i, 90*time.Second, "READY", "1")
	if n := boots(t, booted); n != before+more {
		t.Fatalf("READY=1 after the reload came when the app had booted %d more times, not %d", n-before, more)
	}
	if ready.at.Sub(reloading.at) < sdBoot {
		t.Fatalf("READY=1 came %v after RELOADING=1, within the app's boot", ready.at.Sub(reloading.at))
	}
	sd.awaitStatus(t, j, 5*time.Second, "serving apps/systemd.ru")
	equal(t, "after the reload", statusAndBody(s.url+"/sleep?s=0"), "200 slept")
}

// sdStop checks the stop: STOPPING=1 at SIGTERM, the STATUS counting the
// request in flight, which finishes, and a clean exit.
func sdStop(t *testing.T, s *server, sd *sdSocket) {
	t.Helper()
	from := len(sd.messages())
	slow := background(t, func(t testing.TB) string { return statusAndBody(s.url + "/sleep?s=2") })
	sd.awaitStatus(t, from, 5*time.Second, "1 request in flight")
	from = len(sd.messages())
	s.cmd.Process.Signal(syscall.SIGTERM)
	sd.await(t, from, 10*time.Second, "STOPPING", "1")
	sd.awaitStatus(t, from, 5*time.Second, "stopping (SIGTERM): 1 request in flight")
	equal(t, "the request in flight at SIGTERM", <-slow, "200 slept")
	equal(t, "exit status", s.wait(t, 30*time.Second), 0)
}

func monotonicUsec(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano() / 1000)
}

// One process: READY=1 once the app answers, STATUS lines, watchdog pings
// that stop while Ruby holds the VM thread, RELOADING=1/READY=1 around
// SIGUSR2, STOPPING=1 at SIGTERM; the app sees none of systemd's variables.
func TestDeploySystemdNotify(t *testing.T) {
	sd := listenSD(t)
	s, booted := startSystemd(t, sd)
	sdReady(t, s, sd, booted, 1, "serving apps/systemd.ru: one process, 0 requests in flight")
	equal(t, "systemd's variables in the app", s.get(t, "/env").body, "NOTIFY_SOCKET=nil WATCHDOG_USEC=nil WATCHDOG_PID=nil")
	sdPings(t, sd)

	// The STATUS follows the requests in flight.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); statusAndBody(s.url + "/sleep?s=3") }()
	}
	i, _ := sd.awaitStatus(t, 0, 3*time.Second, "serving apps/systemd.ru: one process, 3 requests in flight")
	wg.Wait()
	sd.awaitStatus(t, i, 3*time.Second, "serving apps/systemd.ru: one process, 0 requests in flight")

	sdHeld(t, s, sd, "Ruby code has held the VM thread for")
	sdReload(t, s, sd, booted, syscall.SIGUSR2, 1)
	sdStop(t, s, sd)
}

// Cluster mode, -w 2: the same, READY=1 once both workers serve, pings
// that stop while one worker's VM thread is held (the other serves on),
// RELOADING=1 and READY=1 around the rolling restart of SIGUSR2, which
// Caddy alone does not send.
func TestDeploySystemdNotifyWorkers(t *testing.T) {
	sd := listenSD(t)
	s, booted := startSystemd(t, sd, "-w", "2")
	sdReady(t, s, sd, booted, 2, "serving apps/systemd.ru: 2 workers, 0 requests in flight")
	equal(t, "systemd's variables in a worker's app", s.get(t, "/env").body, "NOTIFY_SOCKET=nil WATCHDOG_USEC=nil WATCHDOG_PID=nil")
	sdPings(t, sd)
	sdHeld(t, s, sd, "Ruby code has held worker ")
	sdReload(t, s, sd, booted, syscall.SIGUSR2, 2)
	sdStop(t, s, sd)
}

// --preload: READY=1 once the template has booted the app and forked the
// workers; a SIGHUP boots a new template (one boot) before READY=1.
func TestDeploySystemdNotifyPreload(t *testing.T) {
	sd := listenSD(t)
	s, booted := startSystemd(t, sd, "-w", "2", "--preload")
	sdReady(t, s, sd, booted, 1, "serving apps/systemd.ru: 2 workers, 0 requests in flight")
	sdReload(t, s, sd, booted, syscall.SIGHUP, 1)
	sdStop(t, s, sd)
}
