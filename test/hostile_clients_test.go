package test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
)

// Places per client: one address that opens many connections holds at
// most --max-requests-per-client places in Ruby (a quarter of
// --max-requests by default), whatever the protocol; the address is the
// one the trusted-proxy rules name.

// perClient is the default bound at the default --max-requests (1024).
const perClient = 256

// Twelve and fifty HTTP/2 connections from 127.0.0.1, a hundred streams
// each asking for a 256 KiB page, END_STREAM sent and the socket never
// read: without a bound per client they held all 1,024 places until the
// write timeout (30 s) cut them, and a client elsewhere got 503 meanwhile.
// Now the attacker holds 256 places and its other streams get 503, while
// a well-behaved client at 127.0.0.2 gets at least 95% of its answers;
// the server's memory stays within a bound, and goes back once the
// attacker leaves. Over h2c and TLS, in one process and with -w 2 (the
// front end admits); Caddy alone (file_server) under the same attack is
// the comparison, its figures logged.
func TestHostileClientPlaces(t *testing.T) {
	for _, d := range doors() {
		for _, m := range []struct {
			name string
			args []string
		}{{"", nil}, {" -w 2", []string{"-w", "2"}}} {
			t.Run(d.name+m.name, func(t *testing.T) {
				s, admin := hostileServer(t, d, m.args...)
				for _, conns := range []int{12, 50} {
					neverReading(t, s, admin, d, conns, m.args != nil)
				}
			})
		}
	}
	t.Run("caddy alone", func(t *testing.T) {
		s := caddyFiles(t)
		for _, conns := range []int{12, 50} {
			neverReading(t, s, "", door{name: "h2c"}, conns, false)
		}
	})
}

// neverReading runs the attack of conns connections against s (admin: its
// admin API, "" for Caddy alone, which has no places to check; workers:
// it runs the app in worker processes).
func neverReading(t *testing.T, s *server, admin string, d door, conns int, workers bool) {
	t.Helper()
	good := goodClientFrom(s, d, "127.0.0.2")
	if ok, _, _, failure := good.run("/ok", "ok", 50, 5); ok != 50 {
		t.Fatalf("before the attack a well-behaved client got %d of 50 answers (%s)", ok, failure)
	}
	// At rest after as many pages at once as the attack will hold: the
	// memory a burst of that size keeps anyway (Ruby's heap and fibers, Go's
	// heap) is not the attack's.
	good.run("/page256", strings.Repeat("q", 256<<10), 2*perClient, perClient)
	pid := s.cmd.Process.Pid
	time.Sleep(3 * time.Second) // the idle release
	rest := treeRSS(pid)
	var attackers []*rawH2
	for range conns {
		a := newRawH2(t, s.addr, d, false)
		for range 100 {
			if _, err := a.get("/page256"); err != nil {
				t.Fatal(err)
			}
		}
		attackers = append(attackers, a)
	}
	if admin != "" {
		eventually(t, 30*time.Second, "the attacker's places taken", func() bool {
			return metricNumber(t, admin, "ruvoy_requests_in_flight") >= perClient
		})
	} else {
		time.Sleep(2 * time.Second) // the streams opened
	}
	stop := make(chan struct{})
	peak := peakTreeRSS(pid, stop)
	const asked = 300
	ok, p50, p99, failure := good.run("/ok", "ok", asked, 10)
	inFlight := -1.0
	if admin != "" {
		inFlight = metricNumber(t, admin, "ruvoy_requests_in_flight")
	}
	close(stop)
	peakMiB := <-peak
	t.Logf("%s, %d never-reading connections x 100 streams from 127.0.0.1: a client at 127.0.0.2 got %d/%d (p50 %v, p99 %v); in Ruby %v; RSS %d MiB at rest, %d at most (%.0f KiB a connection)",
		d.name, conns, ok, asked, p50.Round(time.Microsecond), p99.Round(time.Microsecond), inFlight, rest, peakMiB,
		float64(peakMiB-rest)*1024/float64(conns))
	// 95%, as the issue asks: on a busy 2-core machine a few answers
	// may take past the client's timeout; none should be 503.
	if ok < asked*95/100 {
		t.Errorf("under the attack a well-behaved client got %d of %d answers (last failure: %s)", ok, asked, failure)
	}
	if admin != "" {
		// The attacker's places, and the well-behaved client's 10.
		if inFlight > perClient+10 {
			t.Errorf("%v requests in Ruby: one client holds more than its %d places", inFlight, perClient)
		}
		if metricNumber(t, admin, `ruvoy_requests_rejected_total{reason="max_requests_per_client"}`) == 0 {
			t.Errorf("none of the attacker's streams over its places was refused")
		}
		// 256 stalled responses of 256 KiB each, whole in Go (the
		// response window), their fibers, and the refused streams'
		// goroutines blocked on the connection's window (Go's HTTP/2
		// server holds up to 100 a connection, as under Caddy alone):
		// measured 80-125 MiB, and 170 with -w 2, where a worker's relay
		// holds its responses until the front end has read them; before
		// the bound, the 1,024 places took 300 MiB.
		bound := 180
		if workers {
			bound = 240
		}
		if bound *= memoryScale(t); peakMiB > rest+bound {
			t.Errorf("RSS grew from %d to %d MiB under the attack: more than %d MiB", rest, peakMiB, bound)
		}
	}
	for _, a := range attackers {
		a.conn.Close()
	}
	if admin == "" {
		return
	}
	eventually(t, 30*time.Second, "no request left in Ruby", func() bool {
		return metricNumber(t, admin, "ruvoy_requests_in_flight") == 0
	})
	// Once idle the server gives the memory back (the idle release, 2 s
	// after the last request; workers have their own, at the same time).
	released := metricNumber(t, admin, "ruvoy_memory_releases_total")
	eventually(t, 30*time.Second, "an idle release", func() bool {
		return metricNumber(t, admin, "ruvoy_memory_releases_total") > released
	})
	time.Sleep(time.Second)
	after := treeRSS(pid)
	t.Logf("%s, %d connections: RSS %d MiB once the attacker left and the server was idle", d.name, conns, after)
	// Not under the race detector: the shadow memory of what the attack
	// touched stays resident whatever the runtime gives back (make
	// e2e-memory, in make test, checks it).
	if memoryScale(t) == 1 && after > rest+30 {
		t.Errorf("RSS %d MiB once idle after the attack, against %d before: more than 30 MiB kept", after, rest)
	}
}

// goodClientFrom is a well-behaved HTTP/2 client whose connections come
// from the address local.
func goodClientFrom(s *server, d door, local string) *goodClient {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http2.Transport{}
	base := "http://" + s.addr
	if d.tls != nil {
		conf := d.tls.Clone()
		conf.NextProtos = []string{"h2"}
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&tls.Dialer{NetDialer: dialer, Config: conf}).DialContext(ctx, network, addr)
		}
		base = "https://" + s.addr
	} else {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		}
	}
	return &goodClient{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: base}
}

// caddyFiles starts Caddy alone serving the same files from a directory
// (file_server): "ok", and a 256 KiB page.
func caddyFiles(t *testing.T) *server {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok"), []byte("ok"), 0o644)
	os.WriteFile(filepath.Join(dir, "page256"), []byte(strings.Repeat("q", 256<<10)), 0o644)
	port := freePort(t)
	s, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	servers {
		protocols h1 h2c
	}
}
http://:%s {
	bind 127.0.0.1
	root * %s
	file_server
}
`, port, dir))
	return s
}

// treeRSS is the resident memory of a process and its children (a
// cluster's workers), in MiB.
func treeRSS(pid int) int {
	total := rssMiB(pid)
	for _, child := range childPids(pid) {
		total += treeRSS(child)
	}
	return total
}

func childPids(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(field); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// peakTreeRSS is peakRSS over the process and its children.
func peakTreeRSS(pid int, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		peak := 0
		for {
			peak = max(peak, treeRSS(pid))
			select {
			case <-stop:
				out <- peak
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return out
}

// Behind a trusted proxy each forwarded address is a client of its own:
// twenty of them with four requests each in Ruby at once are all served
// under --max-requests-per-client 4, where one forwarded address, the
// proxy itself (no X-Forwarded-For) and a peer that is not trusted (its
// X-Forwarded-For ignored, whatever it names) each get four places and
// 503 with Retry-After for the rest.
func TestHostileClientPlacesBehindProxy(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--trusted-proxies", "127.0.0.1/32", "--max-requests-per-client", "4", "--admin-port", adminPort, app("core.ru"))
	type ask struct{ local, forwarded string }
	run := func(asks []ask) map[int]int {
		var mu sync.Mutex
		counts := map[int]int{}
		var wg sync.WaitGroup
		for _, a := range asks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := fromAddress(t, s, a.local, "/sleep?s=1", a.forwarded)
				mu.Lock()
				counts[status]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return counts
	}
	var many []ask
	for i := range 20 {
		for range 4 {
			many = append(many, ask{"127.0.0.1", fmt.Sprintf("203.0.113.%d", i+1)})
		}
	}
	counts := run(many)
	equal(t, "twenty forwarded clients, four requests each: 200s", counts[200], 80)
	for _, tc := range []struct {
		name  string
		asker func(i int) ask
	}{
		{"one forwarded address", func(int) ask { return ask{"127.0.0.1", "203.0.113.99"} }},
		{"the proxy itself", func(int) ask { return ask{"127.0.0.1", ""} }},
		{"a peer that is not trusted", func(i int) ask { return ask{"127.0.0.2", fmt.Sprintf("198.51.100.%d", i+1)} }},
	} {
		var asks []ask
		for i := range 8 {
			asks = append(asks, tc.asker(i))
		}
		counts := run(asks)
		if counts[200] != 4 || counts[503] != 4 {
			t.Errorf("%s, eight requests at once: %v, want four 200s and four 503s", tc.name, counts)
		}
	}
	if n := metricNumber(t, admin, `ruvoy_requests_rejected_total{reason="max_requests_per_client"}`); n != 12 {
		t.Errorf("refusals for a client's places: %v, want 12", n)
	}
}

// fromAddress GETs path over HTTP/1.1 from the address local, with
// X-Forwarded-For forwarded when not empty; it returns the status (a 503
// must say when to retry).
func fromAddress(t *testing.T, s *server, local, path, forwarded string) int {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext,
	}}
	req, _ := http.NewRequest("GET", s.url+path, nil)
	if forwarded != "" {
		req.Header.Set("X-Forwarded-For", forwarded)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s from %s: %v", path, local, err)
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode == 503 && res.Header.Get("Retry-After") == "" {
		t.Errorf("a 503 without Retry-After")
	}
	return res.StatusCode
}

// A client's places are one count over its connections and protocols:
// with --max-requests-per-client 4, two HTTP/1.1 requests, one over
// HTTP/2 and one over HTTP/3 from 127.0.0.1 fill them; a fifth, over any
// of them, gets 503, while 127.0.0.2 is served.
func TestHostileClientPlacesAcrossProtocols(t *testing.T) {
	c := makeCerts(t)
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, "--max-requests-per-client", "4",
		"--admin-port", adminPort, app("core.ru"))
	base := "https://" + s.addr
	h1, h2 := httpsClient(c.pool, nil, false), httpsClient(c.pool, nil, true)
	h3 := &http.Client{Timeout: 30 * time.Second, Transport: &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool}}}
	status := func(cl *http.Client, path, proto string) int {
		res, err := cl.Get(base + path)
		if err != nil {
			t.Errorf("%s: %v", proto, err)
			return 0
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.Proto != proto {
			t.Errorf("asked over %s, answered over %s", proto, res.Proto)
		}
		return res.StatusCode
	}
	held := make(chan int, 4)
	for _, cl := range []struct {
		c     *http.Client
		proto string
	}{{h1, "HTTP/1.1"}, {h1, "HTTP/1.1"}, {h2, "HTTP/2.0"}, {h3, "HTTP/3.0"}} {
		go func() { held <- status(cl.c, "/sleep?s=3", cl.proto) }()
	}
	eventually(t, 20*time.Second, "four requests in Ruby", func() bool {
		return metricNumber(t, admin, "ruvoy_requests_in_flight") == 4
	})
	equal(t, "a fifth over HTTP/1.1", status(h1, "/sleep?s=0", "HTTP/1.1"), 503)
	equal(t, "a fifth over HTTP/2", status(h2, "/sleep?s=0", "HTTP/2.0"), 503)
	equal(t, "a fifth over HTTP/3", status(h3, "/sleep?s=0", "HTTP/3.0"), 503)
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: c.pool},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
	}}
	equal(t, "another address meanwhile", status(other, "/sleep?s=0", "HTTP/1.1"), 200)
	for range 4 {
		equal(t, "the four held", <-held, 200)
	}
}
