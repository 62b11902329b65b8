package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The same cases through every door: HTTP/1.1 and HTTP/2, each in
// cleartext and over TLS. HEAD, a client that half-closes (HTTP/1.1), one
// that leaves amid the response, one that leaves amid its upload; a
// well-behaved client is served alongside each, and at the end no request
// holds a place or a fiber.

// doorClient is a door as a client sees it: how to reach it, and which
// server serves it.
type doorClient struct {
	name   string
	tls    bool // the TLS server, else the cleartext one (with --h2c)
	h2     bool
	client *http.Client
}

func (d doorClient) url(plain, secure *server, path string) string {
	if d.tls {
		return "https://" + secure.addr + path
	}
	return plain.url + path
}

func doorClients() []doorClient {
	insecure := &tls.Config{InsecureSkipVerify: true}
	return []doorClient{
		{name: "h1", client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}},
		{name: "h2c", h2: true, client: &http.Client{Timeout: 30 * time.Second, Transport: &http2.Transport{
			AllowHTTP: true, DisableCompression: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return new(net.Dialer).DialContext(ctx, network, addr)
			},
		}}},
		{name: "tls h1", tls: true, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: insecure, DisableCompression: true, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
		}}},
		{name: "tls h2", tls: true, h2: true, client: &http.Client{Timeout: 30 * time.Second, Transport: &http2.Transport{
			TLSClientConfig: insecure, DisableCompression: true,
		}}},
	}
}

func TestDoorsCases(t *testing.T) {
	// The app in the front end's own VM, and in a worker forked from a
	// template (--preload): the same doors, the same answers.
	for _, mode := range []struct {
		name string
		args []string
	}{{"one process", nil}, {"forked worker", []string{"-w", "1", "--preload"}}} {
		t.Run(mode.name, func(t *testing.T) { doorsCases(t, mode.args) })
	}
}

func doorsCases(t *testing.T, mode []string) {
	plainAdmin, secureAdmin := freePort(t), freePort(t)
	plain := start(t, append([]string{"--h2c", "--admin-port", plainAdmin, app("core.ru")}, mode...)...)
	c := makeCerts(t)
	secure := start(t, append([]string{"--tls-cert", c.serverCert, "--tls-key", c.serverKey, "--admin-port", secureAdmin, app("core.ru")}, mode...)...)

	for _, d := range doorClients() {
		t.Run(d.name, func(t *testing.T) {
			get := func(t testing.TB, path string) (*http.Response, string) {
				t.Helper()
				res, err := d.client.Get(d.url(plain, secure, path))
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("GET %s: the body: %v", path, err)
				}
				if want := map[bool]int{false: 1, true: 2}[d.h2]; res.ProtoMajor != want {
					t.Fatalf("GET %s: answered over HTTP/%d, want %d", path, res.ProtoMajor, want)
				}
				return res, string(b)
			}
			// A well-behaved client, served throughout the cases.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if res, body := get(inGoroutine(t), "/raw/hello"); res.StatusCode != 200 || body != "hello world" {
						t.Errorf("the well-behaved client: %d %q", res.StatusCode, body)
						return
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			closed := func(name string) string {
				_, body := get(t, "/closed?name="+name)
				return body
			}
			tag := strings.ReplaceAll(d.name, " ", "-")

			// HEAD: the GET's head without its body; a streamed body is
			// closed, not sent.
			head := func(path string) (*http.Response, string) {
				t.Helper()
				req, _ := http.NewRequest("HEAD", d.url(plain, secure, path), nil)
				res, err := d.client.Do(req)
				if err != nil {
					t.Fatalf("HEAD %s: %v", path, err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return res, string(b)
			}
			res, body := head("/raw/hello")
			equal(t, "HEAD of a known length", fmt.Sprint(res.StatusCode, " ", res.ContentLength, " ", body), "200 11 ")
			res, body = head("/counted?name=head-" + tag)
			equal(t, "HEAD of a streamed body", fmt.Sprint(res.StatusCode, " ", body), "200 ")
			eventually(t, 5*time.Second, "the streamed body closed after HEAD", func() bool { return closed("head-"+tag) == "1" })

			// A client that leaves amid the response: the body is closed.
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", d.url(plain, secure, "/slow-counted?name=gone-"+tag), nil)
			res, err := d.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(res.Body, make([]byte, 2048)); err != nil {
				t.Fatal(err)
			}
			cancel()
			res.Body.Close()
			eventually(t, 5*time.Second, "the body closed after its client left", func() bool { return closed("gone-"+tag) == "1" })

			// A client that leaves amid its upload.
			for range 5 {
				ctx, cancel := context.WithCancel(context.Background())
				pr, pw := io.Pipe()
				req, _ := http.NewRequestWithContext(ctx, "POST", d.url(plain, secure, "/env"), pr)
				req.ContentLength = 1 << 20
				done := make(chan struct{})
				go func() {
					defer close(done)
					if res, err := d.client.Do(req); err == nil {
						res.Body.Close()
					}
				}()
				pw.Write(make([]byte, 64<<10))
				cancel()
				pw.CloseWithError(context.Canceled)
				<-done
			}

			// Half-close (HTTP/1.1): the request, then the client's end of
			// the connection closed for writing; the answer still comes whole.
			if !d.h2 {
				equal(t, "a half-closed client's answer", halfClosed(t, d, plain, secure), "slept")
			}
		})
	}
	for _, admin := range []string{"http://127.0.0.1:" + plainAdmin, "http://127.0.0.1:" + secureAdmin} {
		eventually(t, 10*time.Second, "no request holding a place or a fiber", func() bool {
			return metricNumber(t, admin, "ruvoy_requests_in_flight") == 0 && metricNumber(t, admin, "ruvoy_fibers_requests") == 0
		})
	}
}

// halfClosed sends a request that takes 300 ms to answer, closes its end
// of the connection for writing (TLS: close_notify), and returns the body
// of the answer.
func halfClosed(t *testing.T, d doorClient, plain, secure *server) string {
	t.Helper()
	var c net.Conn
	var err error
	if d.tls {
		c, err = tls.Dial("tcp", secure.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	} else {
		c, err = net.Dial("tcp", plain.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /sleep?s=0.3 HTTP/1.1\r\nHost: ruvoy.test\r\n\r\n")
	switch c := c.(type) {
	case *tls.Conn:
		err = c.CloseWrite()
	case *net.TCPConn:
		err = c.CloseWrite()
	}
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a half-closed client: reading the answer: %v", err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("a half-closed client: the body: %v", err)
		}
		if res.StatusCode == 100 {
			continue // the probe that tells a half-closed client from one that left
		}
		return fmt.Sprint(string(b))
	}
}
