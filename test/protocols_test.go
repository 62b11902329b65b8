package test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

func httpsClient(pool *x509.CertPool, certs []tls.Certificate, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// HTTPS with the given certificate: HTTP/2 and HTTP/1.1 by ALPN, HTTP/3 on
// the same port, and client certificates reaching env["ruvoy.context"].
func TestShipTLS(t *testing.T) {
	c := makeCerts(t)
	s := start(t, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, "--tls-client-ca", c.caFile, "--context", app("context.ru"))
	base := "https://" + s.addr
	s.waitStdout(t, "banner", "on "+base)
	for _, tc := range []struct {
		name   string
		client *http.Client
		proto  string
	}{
		{"HTTP/2", httpsClient(c.pool, nil, true), "HTTP/2.0"},
		{"HTTP/1.1", httpsClient(c.pool, nil, false), "HTTP/1.1"},
		{"HTTP/3", &http.Client{Timeout: 30 * time.Second, Transport: &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool}}}, "HTTP/3.0"},
	} {
		res, err := tc.client.Get(base + "/")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, tc.name+" protocol", res.Proto, tc.proto)
		var ctx map[string]any
		json.Unmarshal(b, &ctx)
		info, _ := ctx["tls"].(map[string]any)
		equal(t, tc.name+" TLS 1.3", info["version"], any("TLS 1.3"))
		equal(t, tc.name+" no client certificate", info["peer_certificate"], nil)
	}
	// A client certificate, verified against --tls-client-ca.
	res, err := httpsClient(c.pool, []tls.Certificate{c.clientCert}, true).Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var ctx map[string]any
	json.Unmarshal(b, &ctx)
	info := ctx["tls"].(map[string]any)
	equal(t, "peer certificate", info["peer_certificate"], any(string(c.clientPEM)))
	equal(t, "uri_san", asJSON(info["uri_san"]), `["spiffe://ruvoy.test/client"]`)
}

// --tls-internal: a certificate from Caddy's local CA, for development.
func TestShipTLSInternal(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	s := start(t, "--tls-internal", app("context.ru"))
	var pool *x509.CertPool
	eventually(t, 30*time.Second, "the local CA's root", func() bool {
		pem, err := os.ReadFile(filepath.Join(data, "caddy", "pki", "authorities", "local", "root.crt"))
		if err != nil {
			return false
		}
		pool = x509.NewCertPool()
		return pool.AppendCertsFromPEM(pem)
	})
	var res *http.Response
	eventually(t, 30*time.Second, "an HTTPS answer", func() bool {
		var err error
		res, err = httpsClient(pool, nil, true).Get("https://" + s.addr + "/")
		return err == nil
	})
	res.Body.Close()
	equal(t, "status", res.StatusCode, 200)
	equal(t, "protocol", res.Proto, "HTTP/2.0")
}

// smugglingShapes are HTTP/1.1 requests whose framing a proxy in front
// could read differently: each gets 400 and a closed connection.
var smugglingShapes = map[string]string{
	"Transfer-Encoding with Content-Length": "POST /raw/options HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"chunked on HTTP/1.0":                   "POST /raw/options HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"Transfer-Encoding other than chunked":  "POST /raw/options HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"two Transfer-Encodings":                "POST /raw/options HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"obs-fold":                              "GET /raw/options HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n  b\r\n\r\n",
	"an obs-folded Transfer-Encoding":       "POST /raw/options HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"conflicting Content-Lengths":           "POST /raw/options HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	"a Content-Length list":                 "POST /raw/options HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello",
}

// HTTP/1.1 request-smuggling shapes: 400, the connection closed, the app
// never called (over TLS too: TestHostileSmugglingOverBothDoors).
func TestShipRefusesRequestSmuggling(t *testing.T) {
	s := start(t, app("core.ru"))
	for name, request := range smugglingShapes {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, request)
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		io.Copy(io.Discard, res.Body)
		equal(t, name+": status", res.StatusCode, 400)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: the connection stayed open (%v)", name, err)
		}
		c.Close()
	}
	equal(t, "app calls", s.get(t, "/closed?name=options").body, "0")
	// Well-framed requests, pipelined, still pass.
	r := s.raw(t, "POST /raw/hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"+
		"GET /raw/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	equal(t, "pipelined answers", strings.Count(r, "HTTP/1.1 200 OK"), 2)
}

// Body bytes that arrive after their head, in pieces, pass the guard
// straight to Go; it must still find where the body ends and judge the
// head that follows.
func TestShipGuardFollowsBodiesInPieces(t *testing.T) {
	s := start(t, app("core.ru"))
	smuggled := "POST /raw/options HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for name, pieces := range map[string][]string{
		"Content-Length": {"POST /env HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", "hello", "world" + smuggled},
		"chunked": {"POST /env HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n", "hel", "lo",
			"\r\n5\r\nworld\r\n0\r\n\r\n" + smuggled},
	} {
		c, br := sendInPieces(t, s.addr, pieces, 50*time.Millisecond)
		for i, want := range []int{200, 400} {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: response %d: %v", name, i+1, err)
			}
			b, _ := io.ReadAll(res.Body)
			equal(t, name+": status", res.StatusCode, want)
			if want == 200 {
				mustContain(t, name+": the body the app read", string(b), `"input":"helloworld"`)
			}
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: the connection stayed open (%v)", name, err)
		}
		c.Close()
	}
	equal(t, "app calls", s.get(t, "/closed?name=options").body, "0")
}

// Heads that arrive in pieces, behind a request with a body and larger
// than the guard's 32 KiB buffer (under a Caddyfile that allows 128 KiB
// heads): the guard holds each whole before Go sees it.
func TestShipGuardHoldsHeadsInPieces(t *testing.T) {
	s := startCaddyfile(t, `servers {
		max_header_size 128KiB
		listener_wrappers {
			ruvoy_http1_guard
		}
	}`)
	hello := "GET /raw/hello HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, size := range []int{16000, 60000} {
		big := strings.Repeat("a", size)
		body := strings.Repeat("b", 17000)
		withBody := "POST /env HTTP/1.1\r\nHost: x\r\nContent-Length: 17000\r\n\r\n" + body
		bigHead := "GET /env HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n"
		// A small request and the start of the large head in one write:
		// Go takes the first while the guard still holds the second.
		pieces := []string{withBody, hello + bigHead[:10000]}
		for at := 10000; at < len(bigHead); at += 5000 {
			pieces = append(pieces, bigHead[at:min(at+5000, len(bigHead))])
		}
		pieces = append(pieces, "GET /raw/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		c, br := sendInPieces(t, s.addr, pieces, 20*time.Millisecond)
		next := func(what string) []byte {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%d-byte header: %s: %v", size, what, err)
			}
			b, _ := io.ReadAll(res.Body)
			equal(t, what+": status", res.StatusCode, 200)
			return b
		}
		var env map[string]any
		json.Unmarshal(next("the request with a body"), &env)
		equal(t, "the body it read", env["input"] == any(body), true)
		equal(t, "the small request", string(next("the small request")), "hello world")
		env = nil
		json.Unmarshal(next("the large head"), &env)
		equal(t, fmt.Sprintf("a %d-byte header", size), env["HTTP_X_BIG"] == any(big), true)
		equal(t, "the last request", string(next("the last request")), "hello world")
		c.Close()
	}
}

// sendInPieces writes each piece on a new connection, pausing after each
// so that the server reads them apart, and returns a reader of the answers.
func sendInPieces(t *testing.T, addr string, pieces []string, pause time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, p := range pieces {
		io.WriteString(c, p)
		time.Sleep(pause)
	}
	return c, bufio.NewReader(c)
}

// --h2c serves HTTP/2 by prior knowledge (the stream tests use it). The
// Upgrade: h2c handshake is deprecated (RFC 9113) and Go's server does not
// offer it: such a request is answered in HTTP/1.1, as the RFC allows.
func TestShipH2CUpgradeFallsBack(t *testing.T) {
	s := start(t, "--h2c", app("core.ru"))
	r := s.rawRequest(t, "GET /raw/hello HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
	equal(t, "status", r.status, 200)
	equal(t, "body", r.body, "hello world")
}

// h2spec, the HTTP/2 conformance suite, over TLS and h2c: what fails is
// exactly what docs/protocols.md lists, with its reason.
func TestShipH2spec(t *testing.T) {
	c := makeCerts(t)
	known := knownH2specFailures(t)
	for _, mode := range []string{"tls", "h2c"} {
		var s *server
		args := []string{"tool", "h2spec", "-h", "127.0.0.1", "-o", "3"}
		if mode == "tls" {
			s = start(t, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, "../examples/hello/config.ru")
			args = append(args, "-t", "-k")
		} else {
			s = start(t, "--h2c", "../examples/hello/config.ru")
		}
		args = append(args, "-p", strings.TrimPrefix(s.addr, "127.0.0.1:"))
		out, _ := exec.Command("go", args...).CombinedOutput()
		summary := regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`).FindString(string(out))
		if summary == "" {
			t.Fatalf("%s: h2spec did not finish:\n%s", mode, out)
		}
		var failed []string
		section := ""
		for _, line := range strings.Split(string(out), "\n") {
			trimmed := strings.TrimSpace(line)
			if m := regexp.MustCompile(`^(\d+(\.\d+)*)\. `).FindStringSubmatch(trimmed); m != nil {
				section = m[1]
			}
			if strings.HasPrefix(trimmed, "× ") {
				n, _, _ := strings.Cut(strings.TrimPrefix(trimmed, "× "), ":")
				failed = append(failed, section+"/"+n)
			}
		}
		sort.Strings(failed)
		t.Logf("%s: %s; failing: %v", mode, summary, failed)
		equal(t, mode+" failures", strings.Join(dedupe(failed), " "), strings.Join(known[mode], " "))
	}
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// knownH2specFailures reads the table in docs/protocols.md: rows of
// "| section/case | tls, h2c | reason |".
func knownH2specFailures(t *testing.T) map[string][]string {
	b, err := os.ReadFile("../docs/protocols.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string][]string{}
	row := regexp.MustCompile(`^\| (\d+(?:\.\d+)*/\d+) \| ([a-z0-9, ]+) \|`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			for _, mode := range strings.Split(m[2], ",") {
				mode = strings.TrimSpace(mode)
				known[mode] = append(known[mode], m[1])
			}
		}
	}
	for mode := range known {
		sort.Strings(known[mode])
	}
	return known
}
