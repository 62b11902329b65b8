package test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The hostile-client suite for HTTP/1.x, over cleartext and over TLS: the
// HTTP/1 guard reads the decrypted bytes too, so every shape refused on
// one door is refused on the other, with the same answer.

// h1door is how an HTTP/1.x test reaches a server: cleartext, or TLS
// offering alpn.
type h1door struct {
	name string
	tls  bool
	alpn []string
}

func h1doors() []h1door {
	return []h1door{{name: "cleartext"}, {name: "tls", tls: true, alpn: []string{"http/1.1"}}}
}

// startH1 serves rackup behind the door, with args added.
func startH1(t *testing.T, d h1door, rackup string, args ...string) *server {
	t.Helper()
	if d.tls {
		c := makeCerts(t)
		args = append(args, "--tls-cert", c.serverCert, "--tls-key", c.serverKey)
	}
	return start(t, append(args, app(rackup))...)
}

// dial opens a connection through the door (TLS without checking the
// test certificate: the handshake is not what is tested).
func (d h1door) dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	if !d.tls {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: d.alpn})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exchange sends request on a new connection and reads one answer; it
// reports whether the server closed the connection after it.
func (d h1door) exchange(t *testing.T, addr, request string) (*http.Response, string, bool) {
	t.Helper()
	c := d.dial(t, addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, request) // a large request may be answered before it is all sent
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", d.name, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_, err = br.ReadByte()
	return res, string(b), err != nil
}

// Request-smuggling shapes get 400 and a closed connection over TLS as on
// cleartext, and the app is never called; behind a proxy that frames by
// Content-Length, a smuggled request never reaches the app as a request.
func TestHostileSmugglingOverBothDoors(t *testing.T) {
	for _, d := range h1doors() {
		for _, m := range appModes {
			t.Run(d.name+m.name, func(t *testing.T) { smuggling(t, d, m.args) })
		}
	}
}

// appModes are where a hostile test's app runs: in the front end's own VM,
// and in a worker forked from a template (--preload), whose requests and
// responses cross the worker's socket.
var appModes = []struct {
	name string
	args []string
}{{"", nil}, {" forked worker", []string{"-w", "1", "--preload"}}}

func smuggling(t *testing.T, d h1door, mode []string) {
	s := startH1(t, d, "core.ru", mode...)
	for name, request := range smugglingShapes {
		res, _, closed := d.exchange(t, s.addr, request)
		equal(t, name+": status", res.StatusCode, 400)
		if !closed {
			t.Errorf("%s: the connection stayed open", name)
		}
	}
	// The attacker's request on a connection a proxy pools: the
	// smuggled GET after a body framed as chunked never runs.
	c := d.dial(t, s.addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST /raw/options HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /raw/smuggled HTTP/1.1\r\nX: x")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "the smuggling request's status", res.StatusCode, 400)
	res, err = startedClient(d).Get(base(s, d) + "/closed?name=options")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "app calls", string(b), "0")
}

// Heads too large: a request line over the server's header limit (20 KiB
// under Caddy's default) gets 414, a header over it 431 (Go's own limit
// gives 431 to many headers), over TLS as on cleartext; a well-formed
// request on a new connection is served.
func TestHostileHeadLimits(t *testing.T) {
	for _, d := range h1doors() {
		t.Run(d.name, func(t *testing.T) {
			s := startH1(t, d, "hostile.ru")
			for _, tc := range []struct {
				name    string
				request string
				status  int
			}{
				{"a 2 MiB URI", "GET /ok?" + strings.Repeat("a", 2<<20) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
				{"a 2 MiB header", "GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 2<<20) + "\r\n\r\n", 431},
				{"10,000 headers", "GET /ok HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Many: m\r\n", 10000) + "\r\n", 431},
			} {
				res, body, closed := d.exchange(t, s.addr, tc.request)
				equal(t, tc.name+": status", res.StatusCode, tc.status)
				mustContain(t, tc.name+": body", body, strconv.Itoa(tc.status))
				if !closed {
					t.Errorf("%s: the connection stayed open", tc.name)
				}
			}
			res, body, _ := d.exchange(t, s.addr, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			equal(t, "a well-formed request after them", res.StatusCode, 200)
			equal(t, "its body", body, "ok")
		})
	}
}

// A TLS client that offers only HTTP/1.0 by ALPN is served (Puma serves
// it), as is one that offers no ALPN at all.
func TestHostileTLSHTTP10(t *testing.T) {
	d := h1door{name: "tls, http/1.0", tls: true, alpn: []string{"http/1.0"}}
	s := startH1(t, d, "hostile.ru")
	res, body, closed := d.exchange(t, s.addr, "GET /ok HTTP/1.0\r\nHost: x\r\n\r\n")
	equal(t, "status", res.StatusCode, 200)
	equal(t, "body", body, "ok")
	equal(t, "protocol", res.Proto, "HTTP/1.0")
	if !closed {
		t.Errorf("an HTTP/1.0 connection without keep-alive stayed open")
	}
	d.alpn = nil
	res, body, _ = d.exchange(t, s.addr, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	equal(t, "no ALPN: status", res.StatusCode, 200)
	equal(t, "no ALPN: body", body, "ok")
}

// A client that never reads a 200 MiB stream, on HTTP/1.1 over both
// doors: once no byte has moved for --write-timeout its connection is
// closed, its place in Ruby given back and the cut counted; a
// well-behaved client is served meanwhile.
func TestHostileSlowReaderH1(t *testing.T) {
	for _, d := range h1doors() {
		for _, m := range appModes {
			t.Run(d.name+m.name, func(t *testing.T) { slowReader(t, d, m.args) })
		}
	}
}

func slowReader(t *testing.T, d h1door, mode []string) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := startH1(t, d, "hostile.ru", append([]string{"--write-timeout", "2", "--admin-port", adminPort}, mode...)...)
	c := d.dial(t, s.addr)
	defer c.Close()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") // and read nothing
	eventually(t, 10*time.Second, "the stream in Ruby", func() bool {
		return metricNumber(t, admin, "ruvoy_requests_in_flight") == 1
	})
	good := startedClient(d)
	for range 20 {
		res, err := good.Get(base(s, d) + "/ok")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, "a well-behaved client's answer", string(b), "ok")
	}
	eventually(t, 30*time.Second, "the stalled response cut", func() bool {
		return metricNumber(t, admin, "ruvoy_requests_in_flight") == 0
	})
	equal(t, "responses cut", metricNumber(t, admin, "ruvoy_responses_cut_write_timeout_total"), 1)
	s.waitStderr(t, `"path":"/big"`, 1)
	// The connection is closed: what is left to read ends (over TLS
	// without close_notify: the response was cut).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the stalled connection did not end: %v", err)
	}
}

// A body that yields two parts and then raises: the client gets both
// parts, then the cut (no last chunk on HTTP/1.1, a reset on HTTP/1.0
// and HTTP/2), over both doors.
func TestHostileBodyFailsMidway(t *testing.T) {
	for _, d := range h1doors() {
		t.Run(d.name, func(t *testing.T) {
			s := startH1(t, d, "hostile.ru", "--h2c")
			for _, version := range []string{"1.1", "1.0"} {
				c := d.dial(t, s.addr)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "GET /parts HTTP/%s\r\nHost: x\r\n\r\n", version)
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(res.Body)
				c.Close()
				equal(t, "HTTP/"+version+": what arrived", string(b), "part1part2")
				if err == nil {
					t.Errorf("HTTP/%s: the body looked whole", version)
				}
			}
			// HTTP/2: both parts, then the stream's reset.
			hd := door{name: "h2c"}
			if d.tls {
				hd = door{name: "tls", tls: &tls.Config{InsecureSkipVerify: true}}
			}
			res, err := newGoodClient(s, hd).client.Get(base(s, d) + "/parts")
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			equal(t, "HTTP/2: what arrived", string(b), "part1part2")
			if err == nil {
				t.Errorf("HTTP/2: the body looked whole")
			}
		})
	}
	s := start(t, "--h2c", app("hostile.ru"))
	equal(t, "the server serves on", s.get(t, "/ok").body, "ok")
}

// startedClient is a well-behaved HTTP/1.1 client through the door.
func startedClient(d h1door) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: false,
	}}
}

func base(s *server, d h1door) string {
	if d.tls {
		return "https://" + s.addr
	}
	return s.url
}
