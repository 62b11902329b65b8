package test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// events is what runaway.ru's ensure blocks recorded.
func (s *server) events(t testing.TB) []string {
	t.Helper()
	return s.getList(t, "/events")
}

// A stop ends within the grace period plus a few seconds whatever Ruby
// does: requests still running get Ruvoy::Shutdown where they are (their
// ensure blocks run), at_exit hooks run, and the exit status says requests
// were cut short (3).
func TestRunawayStopCutsRequestsShort(t *testing.T) {
	for _, mode := range runawayModes {
		t.Run(mode.name, func(t *testing.T) { runawayStopCutsShort(t, mode.args) })
	}
}

// runawayModes are one process, and one worker (started anew, and forked
// from a template), whose VM thread reads nothing while Ruby code holds
// it: the stop and a timeout reach it on its urgent socket (worker.go).
var runawayModes = []struct {
	name string
	args []string
}{{"process", nil}, {"worker", []string{"-w", "1"}}, {"forked worker", []string{"-w", "1", "--preload"}}}

func runawayStopCutsShort(t *testing.T, args []string) {
	s := start(t, append(args, "--grace", "1", app("runaway.ru"))...)
	for _, path := range []string{"/sleep?s=60&name=sleeper", "/loop?name=looper"} {
		go http.Get(s.url + path)
	}
	eventually(t, 10*time.Second, "both requests running", func() bool {
		return strings.Count(s.stderr.String(), "the VM thread is held by one request") > 0
	})
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	code := s.wait(t, 30*time.Second)
	took := time.Since(began)
	equal(t, "exit status", code, 3)
	cut := "ruvoy: stopped (SIGTERM): the 2 requests still running after the grace period were cut short (Ruvoy::Shutdown); exit status 3"
	if len(args) > 0 { // the front end knows only that its worker cut some
		cut = "ruvoy: stopped (SIGTERM): requests still running after the grace period were cut short (Ruvoy::Shutdown); exit status 3"
	}
	equal(t, "the stop's line", consoleEntry(t, s, "ruvoy: stopped")["msg"], any(cut))
	if took > 1*time.Second+8*time.Second+5*time.Second {
		t.Fatalf("the stop took %v: over grace (1 s) + 8 s and a margin", took)
	}
	for _, want := range []string{`sleeper: ensure (Ruvoy::Shutdown)`, `looper: ensure (Ruvoy::Shutdown)`} {
		mustContain(t, "the app's at_exit hook", s.stdout.String(), want)
	}
	mustContain(t, "the log", s.stderr.String(), `"msg":"the stop cut a request short"`)
	mustContain(t, "the log's backtrace", s.stderr.String(), "runaway.ru:")
}

// A request that swallows Ruvoy::Shutdown and never yields cannot hold the
// stop either: the process exits 4 without at_exit hooks, saying which
// request held it.
func TestRunawayStopWithStubbornRequest(t *testing.T) {
	s := start(t, "--grace", "1", app("runaway.ru"))
	go http.Get(s.url + "/stubborn")
	eventually(t, 10*time.Second, "the request holding the VM", func() bool {
		return strings.Contains(s.stderr.String(), "the VM thread is held by one request")
	})
	began := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	code := s.wait(t, 40*time.Second)
	equal(t, "exit status", code, 4)
	if took := time.Since(began); took > 1*time.Second+8*time.Second+10*time.Second {
		t.Fatalf("the stop took %v", took)
	}
	mustContain(t, "the log", s.stderr.String(), `the VM thread did not stop: exiting without the app's at_exit hooks","held"`)
	mustContain(t, "the log names the request", s.stderr.String(), `"path":"/stubborn"`)
}

// --request-timeout raises Ruvoy::RequestTimeout in the request that ran
// too long, whether it waits or computes: 503, its ensure runs, a log line
// with its backtrace; other requests go on.
func TestRunawayRequestTimeout(t *testing.T) {
	for _, mode := range runawayModes {
		t.Run(mode.name, func(t *testing.T) { runawayRequestTimeout(t, mode.args) })
	}
}

func runawayRequestTimeout(t *testing.T, args []string) {
	s := start(t, append(args, "--request-timeout", "1", app("runaway.ru"))...)
	for _, path := range []string{"/sleep?s=30&name=sleeper", "/loop?name=looper"} {
		began := time.Now()
		r := s.get(t, path)
		equal(t, path+" status", r.status, 503)
		if took := time.Since(began); took < time.Second || took > 10*time.Second {
			t.Errorf("%s answered after %v, want about 1 s", path, took)
		}
	}
	equal(t, "a quick request", s.get(t, "/spin?s=0.1&name=quick").body, "spun")
	events := strings.Join(s.events(t), "\n")
	for _, want := range []string{"sleeper: ensure (Ruvoy::RequestTimeout)", "looper: ensure (Ruvoy::RequestTimeout)", "quick: ensure (done)"} {
		mustContain(t, "events", events, want)
	}
	if !regexp.MustCompile(`"msg":"a request ran past its timeout",("worker":0,)?"method":"GET","path":"/loop"`).MatchString(s.stderr.String()) {
		t.Errorf("the log has no timeout of /loop:\n%s", s.stderr)
	}
	mustContain(t, "the backtrace", s.stderr.String(), "runaway.ru:")
}

// Rack::Timeout raises into the request it timed, not into whichever
// request runs when its timer fires (before: a request computing at that
// moment got the error, and the one that ran too long answered 200).
func TestRunawayRackTimeoutHitsItsRequest(t *testing.T) {
	port := freePort(t)
	s := launchIn(t, "", []string{"RACK_TIMEOUT=1"}, port, "-p", port, app("runaway.ru"))
	s.waitReady(t)
	sleeper := background(t, func(t testing.TB) response { return s.get(t, "/sleep?s=3&name=sleeper") })
	time.Sleep(700 * time.Millisecond)
	spinner := s.get(t, "/spin?s=0.6&name=spinner")
	equal(t, "the request computing when the timer fired", spinner.status, 200)
	equal(t, "the request that ran too long", (<-sleeper).status, 500)
	events := strings.Join(s.events(t), "\n")
	mustContain(t, "events", events, "sleeper: ensure (Rack::Timeout::RequestTimeoutException)")
	mustContain(t, "events", events, "spinner: ensure (done)")
}

// While Ruby code holds the VM thread, the gauges say so; past
// --vm-hold-limit the process exits 4 with the backtrace, for a supervisor
// to restart it.
func TestRunawayHoldLimit(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--vm-hold-limit", "3", "--admin-port", adminPort, app("runaway.ru"))
	busy0, _ := strconv.ParseFloat(metricValue(t, admin, "ruvoy_vm_busy_seconds_total"), 64)
	go http.Get(s.url + "/stubborn")
	time.Sleep(1500 * time.Millisecond)
	lag, _ := strconv.ParseFloat(metricValue(t, admin, "ruvoy_vm_loop_lag_seconds"), 64)
	busy, _ := strconv.ParseFloat(metricValue(t, admin, "ruvoy_vm_busy_seconds_total"), 64)
	if lag < 1 || busy-busy0 < 1 {
		t.Errorf("1.5 s into the hold: loop lag %.3f s, busy %.3f s more; want both over 1 s", lag, busy-busy0)
	}
	equal(t, "exit status", s.wait(t, 30*time.Second), 4)
	mustContain(t, "the log", s.stderr.String(), `"msg":"ruvoy: Ruby code has held the VM thread past the hold limit: exiting so that a fresh process can serve"`)
	mustContain(t, "the backtrace", s.stderr.String(), "runaway.ru:")
}

// A body that arrives too slowly gets 408 and a log line; and uploads that
// trickle hold only the bytes they sent, so the body budget stays free for
// the others (before, each reserved 384 KiB from its first byte; now each
// holds its working set and what it sent).
func TestRunawaySlowUploads(t *testing.T) {
	s := startCaddyfileApp(t, "edges.ru", "servers {\n\t\ttimeouts {\n\t\t\tread_body_idle 1s 1024\n\t\t}\n\t}")
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
	answered := make(chan string, 1)
	go func() { b, _ := io.ReadAll(c); answered <- string(b) }()
	var out string
	for i := 0; out == "" && i < 100; i++ {
		c.Write([]byte("x"))
		select {
		case out = <-answered:
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(out, "HTTP/1.1 408 Request Timeout\r\n") {
		t.Fatalf("a trickling upload: want 408, got %q", out)
	}
	// The line is written as the answer goes out, not before it.
	eventually(t, 5*time.Second, "the log line", func() bool {
		return strings.Contains(s.stderr.String(), `a request body arrived too slowly`)
	})

	// Six uploads trickling, each one byte of a megabyte, under a 1 MiB
	// budget: another upload still gets in (before, two such uploads took
	// the whole budget).
	adminPort := freePort(t)
	s = start(t, "--max-inflight-body-bytes", strconv.Itoa(1<<20), "--admin-port", adminPort, app("edges.ru"))
	for i := 0; i < 6; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\nx")
	}
	time.Sleep(300 * time.Millisecond)
	body := bytes.Repeat([]byte("y"), 100<<10)
	r := s.do(t, "POST", "/echo", bytes.NewReader(body))
	equal(t, "an upload beside the tricklers", r.status, 200)
	equal(t, "its body", len(r.body), len(body))
	held, _ := strconv.ParseFloat(metricValue(t, "http://127.0.0.1:"+adminPort, "ruvoy_request_body_bytes_held"), 64)
	if want := float64(6 * (128<<10 + 1)); held > want {
		t.Errorf("the tricklers hold %.0f body bytes, want no more than their working sets and what they sent (%.0f)", held, want)
	}
}

// HTTP/2 rapid reset: streams opened and reset at once give their places
// back at once, and one connection cannot have more than about 64 requests
// that Ruby still unwinds (admission checks the count before the requests
// it admits at the same moment add to it); requests from other clients are
// served meanwhile.
func TestRunawayRapidReset(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--h2c", "--max-requests", "100", "--admin-port", adminPort, app("runaway.ru"))
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	go func() {
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	// The attack goes on until the 40 requests below are done, and 600
	// streams at least: 20 streams opened, 5 ms for them to reach Ruby,
	// the 20 reset, and again. (Before, 600 streams
	// each reset at once were sent before the first request below, and
	// none of them ran in Ruby; unpaced, 245,000 went within a second,
	// when the server cut the connection.)
	var sent atomic.Int64
	stop := make(chan struct{})
	attack := make(chan error, 1)
	go func() {
		const batch = 20
		for next := uint32(1); ; next += 2 * batch {
			select {
			case <-stop:
				if sent.Load() >= 600 {
					attack <- nil
					return
				}
			default:
			}
			for i := uint32(0); i < batch; i++ {
				hbuf.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/spin?s=0.01&name=reset"}} {
					enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: next + 2*i, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
					attack <- fmt.Errorf("stream %d: %w", next+2*i, err)
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
			for i := uint32(0); i < batch; i++ {
				if err := fr.WriteRSTStream(next+2*i, http2.ErrCodeCancel); err != nil {
					attack <- fmt.Errorf("resetting stream %d: %w", next+2*i, err)
					return
				}
			}
			sent.Add(batch)
		}
	}()
	eventually(t, 10*time.Second, "the attack under way", func() bool { return sent.Load() >= 50 })
	var failed atomic.Int64
	maxOrphans := 0
	sentBefore := sent.Load()
	for i := 0; i < 40; i++ {
		if r := s.get(t, "/"); r.status != 200 {
			failed.Add(1)
		}
		if n, _ := strconv.Atoi(metricValue(t, admin, "ruvoy_requests_orphaned")); n > maxOrphans {
			maxOrphans = n
		}
	}
	during := sent.Load() - sentBefore
	close(stop)
	if err := <-attack; err != nil {
		t.Fatalf("the attack ended before the requests did: %v", err)
	}
	if during == 0 || maxOrphans == 0 {
		t.Fatalf("while the 40 requests ran, %d streams were opened and reset, and Ruby unwound at most %d of them: the attack did not overlap the requests",
			during, maxOrphans)
	}
	started := strings.Count(strings.Join(s.events(t), "\n"), "reset: ensure")
	t.Logf("streams opened and reset: %d, %d of them while the 40 requests ran; reset requests that ran in Ruby: %d; orphans at most %d; admitted %s",
		sent.Load(), during, started, maxOrphans, metricValue(t, admin, "ruvoy_requests_admitted_total"))
	equal(t, "requests of other clients that failed during the attack", failed.Load(), 0)
	if maxOrphans > 64+16 {
		t.Errorf("%d requests still unwinding for one connection, want about 64", maxOrphans)
	}
	eventually(t, 30*time.Second, "the reset requests unwound", func() bool {
		return metricValue(t, admin, "ruvoy_requests_orphaned") == "0" && metricValue(t, admin, "ruvoy_requests_in_flight") == "0"
	})
}
