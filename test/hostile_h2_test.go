package test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The hostile-client suite for HTTP/2, over cleartext (h2c) and TLS: each
// attack runs beside a well-behaved client, which must get every answer
// whole, and the server's memory stays under a stated bound.

// Five connections set their window to 0 and open 250 streams each: a
// 100 KiB page and a 200 MiB stream that can never send a byte. Each
// connection holds at most --max-requests-per-connection places in Ruby
// (100 by default, which the server also advertises as its concurrent
// streams: the attacker, who does not wait for that, gets the others
// refused), so the well-behaved client still gets every answer; the write
// timeout then cuts the stalled responses and gives their places back.
func TestHostileH2ZeroWindow(t *testing.T) {
	const perConn = 100
	for _, d := range doors() {
		// The last in a worker forked from a template (appModes): the
		// stalled responses wait in the front end, the worker's windows full.
		for i, path := range []string{"/page", "/big", "/big"} {
			m := appModes[i/2]
			t.Run(d.name+path+m.name, func(t *testing.T) {
				// One client's 500 streams: the bound per connection is what
				// is tested, not the one per client (hostile_clients_test.go).
				s, admin := hostileServer(t, d, append([]string{"--write-timeout", "3", "--max-requests-per-client", "1024"}, m.args...)...)
				good := newGoodClient(s, d)
				ok, p50, p99, failure := good.run("/ok", "ok", 300, 10)
				equal(t, "answers before the attack", ok, 300)
				rest := rssMiB(s.cmd.Process.Pid)

				var attackers []*rawH2
				for range 5 {
					a := newRawH2(t, s.addr, d, true, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
					for range 250 {
						if _, err := a.get(path); err != nil {
							t.Fatal(err)
						}
					}
					attackers = append(attackers, a)
				}
				for _, a := range attackers {
					eventually(t, 10*time.Second, "SETTINGS_MAX_CONCURRENT_STREAMS 100", func() bool { return a.streams.Load() == perConn })
				}
				eventually(t, 10*time.Second, "the attack's streams in Ruby", func() bool {
					return metricNumber(t, admin, "ruvoy_requests_in_flight") >= 5*perConn
				})
				stop := make(chan struct{})
				peak := peakRSS(s.cmd.Process.Pid, stop)
				okUnder, p50Under, p99Under, failure := good.run("/ok", "ok", 300, 10)
				inFlight := metricNumber(t, admin, "ruvoy_requests_in_flight")
				close(stop)
				peakMiB := <-peak
				t.Logf("%s %s: a well-behaved client got %d/300 (p50 %v, p99 %v) against %d/300 (p50 %v, p99 %v) before; in Ruby: %v; RSS %d MiB at rest, %d MiB at most under attack",
					d.name, path, okUnder, p50Under.Round(time.Microsecond), p99Under.Round(time.Microsecond), ok,
					p50.Round(time.Microsecond), p99.Round(time.Microsecond), inFlight, rest, peakMiB)
				if okUnder != 300 {
					t.Errorf("under the attack a well-behaved client got %d of 300 answers (last failure: %s)", okUnder, failure)
				}
				if inFlight > 5*perConn {
					t.Errorf("%v requests in Ruby: five connections hold more than %d places each", inFlight, perConn)
				}
				if bound := 300 * memoryScale(t); peakMiB > rest+bound {
					t.Errorf("RSS grew from %d to %d MiB under the attack: more than %d MiB", rest, peakMiB, bound)
				}
				// The write timeout cuts the stalled responses.
				eventually(t, 30*time.Second, "the stalled responses cut", func() bool {
					return metricNumber(t, admin, "ruvoy_responses_cut_write_timeout_total") >= 5*perConn
				})
				s.waitStderr(t, "the response was cut, its place in Ruby given back", 1)
				for _, a := range attackers {
					a.conn.Close()
				}
				eventually(t, 30*time.Second, "no request left in Ruby", func() bool {
					return metricNumber(t, admin, "ruvoy_requests_in_flight") == 0
				})
			})
		}
	}
}

// Floods of control frames, CONTINUATION frames without end, and streams
// reset as soon as they open (rapid reset): the well-behaved client gets
// every answer meanwhile, memory stays bounded, and Caddy answering by
// itself (respond) under the same flood does no better.
func TestHostileH2Floods(t *testing.T) {
	floods := map[string]func(a *rawH2) error{
		"settings": func(a *rawH2) error {
			return a.write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384})
			})
		},
		"ping": func(a *rawH2) error {
			return a.write(func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) })
		},
		"window": func(a *rawH2) error {
			return a.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1) })
		},
		"rapid reset": func(a *rawH2) error {
			id, err := a.get("/page")
			if err == nil {
				err = a.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
			}
			return err
		},
	}
	targets := map[string]func(t *testing.T, d door) (*server, string){
		"ruvoy": func(t *testing.T, d door) (*server, string) { s, _ := hostileServer(t, d); return s, "/ok" },
		"caddy": caddyRespond,
	}
	for _, d := range doors() {
		for target, launch := range targets {
			if target == "caddy" && d.tls != nil {
				continue // the same HTTP/2 server as over h2c
			}
			s, path := launch(t, d)
			good := newGoodClient(s, d)
			rest := rssMiB(s.cmd.Process.Pid)
			for name, frame := range floods {
				t.Run(d.name+"/"+target+"/"+name, func(t *testing.T) {
					stop := make(chan struct{})
					peak := peakRSS(s.cmd.Process.Pid, stop)
					done := make(chan string)
					for i := range 4 {
						// Two flooders read what the server sends, two never do.
						a := newRawH2(t, s.addr, d, i%2 == 0)
						go func() {
							sent := 0
							var err error
							for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && err == nil; sent++ {
								err = frame(a)
							}
							a.conn.Close()
							done <- fmt.Sprintf("%d frames (%v)", sent, err)
						}()
					}
					ok, _, p99, failure := good.run(path, "ok", 200, 8)
					var sent []string
					for range 4 {
						sent = append(sent, <-done)
					}
					close(stop)
					peakMiB := <-peak
					t.Logf("%s, %s under a %s flood: the well-behaved client got %d/200 (p99 %v); RSS %d MiB at rest, %d at most; flooders: %s",
						target, d.name, name, ok, p99.Round(time.Microsecond), rest, peakMiB, strings.Join(sent, ", "))
					if ok != 200 {
						t.Errorf("a well-behaved client got %d of 200 answers (last failure: %s)", ok, failure)
					}
					// Caddy alone is the comparison: its figures are logged.
					if bound := 200 * memoryScale(t); target == "ruvoy" && peakMiB > rest+bound {
						t.Errorf("RSS grew from %d to %d MiB under the flood: more than %d MiB", rest, peakMiB, bound)
					}
				})
			}
		}
	}
}

// A client that sends HEADERS and CONTINUATION frames without end (the
// CONTINUATION flood): Go's server counts the header bytes and ends the
// connection; the well-behaved client gets its answers meanwhile.
func TestHostileH2Continuation(t *testing.T) {
	for _, d := range doors() {
		t.Run(d.name, func(t *testing.T) {
			s, _ := hostileServer(t, d)
			good := newGoodClient(s, d)
			a := newRawH2(t, s.addr, d, true)
			a.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: a.head("/ok"), EndStream: true})
			})
			junk := []byte(strings.Repeat("\x00", 16000))
			result := make(chan string, 1)
			go func() {
				for i := 0; ; i++ {
					if err := a.write(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, junk) }); err != nil {
						result <- strconv.Itoa(i) + " frames: " + err.Error()
						return
					}
					select {
					case <-a.closed:
						result <- strconv.Itoa(i) + " frames, then the server closed"
						return
					default:
					}
				}
			}()
			ok, _, _, failure := good.run("/ok", "ok", 200, 8)
			select {
			case r := <-result:
				t.Logf("%s: %s", d.name, r)
			case <-time.After(20 * time.Second):
				t.Errorf("the server still reads CONTINUATION frames after 20s")
			}
			if ok != 200 {
				t.Errorf("a well-behaved client got %d of 200 answers (last failure: %s)", ok, failure)
			}
		})
	}
}

// caddyRespond starts Caddy answering "ok" by itself (respond), behind the
// same door: the comparison for floods that never reach an app.
func caddyRespond(t *testing.T, d door) (*server, string) {
	port := freePort(t)
	site := "http://:" + port
	global := "servers {\n\t\tprotocols h1 h2c\n\t}"
	if d.tls != nil {
		c := makeCerts(t)
		d.tls.RootCAs = c.pool
		site = "https://127.0.0.1:" + port
		global = ""
		site += " {\n\ttls " + c.serverCert + " " + c.serverKey + "\n"
	} else {
		site += " {\n"
	}
	s, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	%s
}
%s	bind 127.0.0.1
	respond "ok"
}
`, global, site))
	return s, "/ok"
}
