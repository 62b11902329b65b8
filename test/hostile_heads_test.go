package test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Three hundred connections each send a 1,000,000-byte header line and
// never the blank line. The HTTP/1 guard refuses a head as soon as it is
// longer than Go's server would read (the server's max_header_size, 16 KiB
// under Caddy, and 4 KiB of Go's slack): each attacker hears 431 at once,
// as from Caddy alone, where before the guard took up to 1 MiB of each
// and answered only at the 60 s header timeout (1.3-1.5 MiB a connection,
// 420 MiB for the lot). A well-behaved client is served meanwhile; over
// cleartext and TLS, in one process and with -w 2 (the front end's guard),
// and Caddy alone (respond) beside them.
func TestHostileHeadFlood(t *testing.T) {
	for _, d := range h1doors() {
		for _, m := range []struct {
			name string
			args []string
		}{{"", nil}, {" -w 2", []string{"-w", "2"}}} {
			t.Run(d.name+m.name, func(t *testing.T) {
				headFlood(t, startH1(t, d, "hostile.ru", m.args...), d, true)
			})
		}
		t.Run(d.name+" caddy alone", func(t *testing.T) {
			hd := door{name: "h2c"}
			if d.tls {
				hd = door{name: "tls", tls: &tls.Config{ServerName: "localhost"}}
			}
			s, _ := caddyRespond(t, hd)
			headFlood(t, s, d, false)
		})
	}
}

// headFlood runs the attack against s; for ruvoy (bounded) the memory
// bound is checked, for Caddy alone its figures are logged.
func headFlood(t *testing.T, s *server, d h1door, bounded bool) {
	t.Helper()
	const conns, line = 300, 1_000_000
	good := startedClient(d)
	get := func() error {
		res, err := good.Get(base(s, d) + "/ok")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "ok" {
			return fmt.Errorf("%d %q", res.StatusCode, b)
		}
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("before the attack: %v", err)
	}
	pid := s.cmd.Process.Pid
	time.Sleep(time.Second)
	rest := treeRSS(pid)

	// Every connection open (over TLS, its handshake done) before any
	// sends its head.
	var attackers []interface {
		io.ReadWriter
		Close() error
	}
	for range conns {
		attackers = append(attackers, d.dial(t, s.addr))
	}
	head := []byte("GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", line))
	stop := make(chan struct{})
	peak := peakTreeRSS(pid, stop)
	began := time.Now()
	var mu sync.Mutex
	statuses := map[int]int{}
	var took []time.Duration
	var wg sync.WaitGroup
	for _, c := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			go c.Write(head) // fails once the server has answered and closed
			if dl, ok := c.(interface{ SetReadDeadline(time.Time) error }); ok {
				dl.SetReadDeadline(time.Now().Add(90 * time.Second))
			}
			status := 0
			if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				status = res.StatusCode
			}
			mu.Lock()
			statuses[status]++
			took = append(took, time.Since(began))
			mu.Unlock()
		}()
	}
	// The well-behaved client, meanwhile.
	served, asked := 0, 0
	var failure error
	for time.Since(began) < 3*time.Second || asked < 20 {
		asked++
		if err := get(); err != nil {
			failure = err
		} else {
			served++
		}
	}
	wg.Wait()
	close(stop)
	peakMiB := <-peak
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("%s, %d connections x %d-byte header line (bounded: %v): answers %v, the last after %v (median %v); a well-behaved client got %d/%d; RSS %d MiB at rest, %d at most (%.0f KiB a connection)",
		d.name, conns, line, bounded, statuses, took[len(took)-1].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond),
		served, asked, rest, peakMiB, float64(peakMiB-rest)*1024/conns)
	if served < asked*95/100 {
		t.Errorf("a well-behaved client got %d of %d answers during the attack (last failure: %v)", served, asked, failure)
	}
	// Each attacker hears 431 (a few may see the connection reset as it
	// closes with their head still arriving, as under Caddy alone).
	if statuses[431] < conns*95/100 {
		t.Errorf("answers to the attackers: %v, want 431 for (nearly) all %d", statuses, conns)
	}
	// At once: well within the 60 s header timeout the answer used to wait for.
	if last := took[len(took)-1]; last > 20*time.Second {
		t.Errorf("the last attacker was answered after %v", last)
	}
	// A connection holds at most the limit (20 KiB) and the guard's read
	// buffer (32 KiB) while its head arrives, then Go's and TLS's own
	// buffers: measured 10-25 MiB for the lot (Caddy alone ~6), where the
	// guard took 420 MiB before.
	if bound := 60 * memoryScale(t); bounded && peakMiB > rest+bound {
		t.Errorf("RSS grew from %d to %d MiB under the attack: more than %d MiB", rest, peakMiB, bound)
	}
}

// The guard's limit is the server's: with max_header_size 64KiB in a
// Caddyfile a 60 KiB header is served and a 70 KiB one gets 431, where
// the default refuses both.
func TestHostileHeadLimitFollowsTheServer(t *testing.T) {
	header := func(kib int) string {
		return "GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", kib<<10) + "\r\nConnection: close\r\n\r\n"
	}
	for _, tc := range []struct {
		servers    string
		at60, at70 int
	}{
		{"servers {\n\t\tlistener_wrappers {\n\t\t\truvoy_http1_guard\n\t\t}\n\t}", 431, 431},
		{"servers {\n\t\tmax_header_size 64KiB\n\t\tlistener_wrappers {\n\t\t\truvoy_http1_guard\n\t\t}\n\t}", 200, 431},
	} {
		s := startCaddyfileApp(t, "hostile.ru", tc.servers)
		d := h1door{name: "cleartext"}
		for _, c := range []struct{ kib, want int }{{60, tc.at60}, {70, tc.at70}} {
			res, _, _ := d.exchange(t, s.addr, header(c.kib))
			if res.StatusCode != c.want {
				t.Errorf("%q: a %d KiB header: %d, want %d", tc.servers, c.kib, res.StatusCode, c.want)
			}
		}
	}
}
