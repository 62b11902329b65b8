package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The documented flags no other test reaches by the flag itself, each end
// to end: --upstream, --max-requests-per-connection, --min-upload-rate.

// countingUpstream is an upstream host that answers /users/ID with its
// name and counts its calls.
func countingUpstream(t *testing.T, name string, tlsCert *tls.Certificate) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"host":%q,"accept":%q}`, strings.TrimPrefix(r.URL.Path, "/users/"), name, r.Header.Get("Accept"))
	})
	var s *httptest.Server
	if tlsCert != nil {
		s = httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		s.StartTLS()
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, &calls
}

// --upstream NAME=URL[,URL...] defines an upstream the app may call: round
// robin over its URLs, TLS to https:// ones (trusted as the system's roots
// say: here the test CA, by SSL_CERT_FILE), 503 from one nobody serves;
// a name no --upstream gave cannot be called.
func TestFlagsUpstream(t *testing.T) {
	c := makeCerts(t)
	cert, err := tls.LoadX509KeyPair(c.serverCert, c.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	a, aCalls := countingUpstream(t, "a", nil)
	b, bCalls := countingUpstream(t, "b", nil)
	secure, secureCalls := countingUpstream(t, "secure", &cert)
	stopped := "http://127.0.0.1:" + freePort(t) // nothing listens there
	securePort := secure.Listener.Addr().(*net.TCPAddr).Port
	s := startEnv(t, []string{"SSL_CERT_FILE=" + c.caFile},
		"--upstream", "users="+a.URL+","+b.URL, "--upstream", "stopped="+stopped, app("extensions.ru"))
	for i := range 20 {
		r := getJSON(t, client, s.url+"/user?id="+strconv.Itoa(i))
		equal(t, "status", r["status"], any(float64(200)))
		mustContain(t, "body", r["body"].(string), fmt.Sprintf(`{"id":"%d","host":`, i))
	}
	equal(t, "calls to the first URL of users (round robin)", aCalls.Load(), 10)
	equal(t, "calls to the second", bCalls.Load(), 10)
	equal(t, "an upstream nobody serves", getJSON(t, client, s.url+"/stopped")["status"], any(float64(503)))
	r := getJSON(t, client, s.url+"/unlisted")
	equal(t, "a name no --upstream gave", r["error"], any("ArgumentError"))

	// https://: the call goes over TLS, checked against the system's roots.
	s = startEnv(t, []string{"SSL_CERT_FILE=" + c.caFile},
		"--upstream", fmt.Sprintf("users=https://localhost:%d", securePort), app("extensions.ru"))
	r = getJSON(t, client, s.url+"/user?id=7")
	equal(t, "over TLS", r["body"], any(`{"id":"7","host":"secure","accept":"application/json"}`))
	equal(t, "calls over TLS", secureCalls.Load(), 1)
	// Without the test CA among the roots, the upstream's certificate is
	// refused: the call never reaches it.
	s = start(t, "--upstream", fmt.Sprintf("users=https://localhost:%d", securePort), app("extensions.ru"))
	r = getJSON(t, client, s.url+"/user?id=8")
	equal(t, "an upstream whose certificate is not trusted", r["status"], any(float64(503)))
	equal(t, "calls over TLS", secureCalls.Load(), 1)
}

// advertisedStreams is the SETTINGS_MAX_CONCURRENT_STREAMS an h2c server
// at addr sends first.
func advertisedStreams(t *testing.T, addr string) uint32 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the server's settings: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				t.Fatal("the server's settings have no SETTINGS_MAX_CONCURRENT_STREAMS")
			}
			return v
		}
	}
}

// --max-requests-per-connection N: one HTTP/2 connection has at most N
// requests in Ruby. It is the connection's advertised concurrent streams
// (a quarter of --max-requests by default, 100 at most); a stream past it
// is refused, and the connection serves on once its requests end.
func TestFlagsMaxRequestsPerConnection(t *testing.T) {
	for _, c := range []struct {
		args []string
		want uint32
	}{{nil, 100}, {[]string{"--max-requests", "8"}, 2}, {[]string{"--max-requests-per-connection", "3"}, 3}} {
		s := start(t, append([]string{"--h2c"}, append(c.args, app("core.ru"))...)...)
		equal(t, fmt.Sprintf("SETTINGS_MAX_CONCURRENT_STREAMS with %v", c.args), advertisedStreams(t, s.addr), c.want)
		s.stop()
	}

	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--h2c", "--max-requests-per-connection", "2", "--admin-port", adminPort, app("core.ru"))
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	// The server's settings, acknowledged: from then on a stream past its
	// limit is the client's error.
	for acked := false; !acked; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok {
			if sf.IsAck() {
				acked = true
			} else {
				fr.WriteSettingsAck()
			}
		}
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	open := func(stream uint32, path string) {
		t.Helper()
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	// answers reads until the streams have ended: their bodies, or "reset".
	answers := func(streams ...uint32) map[uint32]string {
		t.Helper()
		got, body := map[uint32]string{}, map[uint32]string{}
		for len(got) < len(streams) {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("reading the answers: %v (got %v)", err, got)
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				body[f.StreamID] += string(f.Data())
				if f.StreamEnded() {
					got[f.StreamID] = body[f.StreamID]
				}
			case *http2.RSTStreamFrame:
				got[f.StreamID] = "reset: " + f.ErrCode.String()
			}
		}
		return got
	}
	inFlight := 0
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := inGoroutine(t)
		for deadline := time.Now().Add(400 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			n, _ := strconv.Atoi(metricValue(t, admin, "ruvoy_requests_in_flight"))
			inFlight = max(inFlight, n)
		}
	}()
	open(1, "/sleep?s=0.5")
	open(3, "/sleep?s=0.5")
	open(5, "/sleep?s=0.5")
	got := answers(1, 3, 5)
	<-sampled
	equal(t, "the first stream", got[1], "slept")
	equal(t, "the second stream", got[3], "slept")
	equal(t, "the third, past the limit", got[5], "reset: PROTOCOL_ERROR")
	equal(t, "the connection's requests in Ruby at most", inFlight, 2)
	open(7, "/sleep?s=0")
	equal(t, "a stream once the others ended", answers(7)[7], "slept")
}

// --min-upload-rate BYTES: a request body that arrives slower than BYTES
// a second, once a first minute has passed, is answered 408. The same
// trickle goes on past the minute with 0 (off), as does a body faster than
// the rate: both are answered 200 with what they sent. A test of over a
// minute, waiting: it runs beside the other such tests (t.Parallel).
func TestFlagsMinUploadRate(t *testing.T) {
	t.Parallel()
	rated := start(t, "--min-upload-rate", "1024", app("edges.ru"))
	off := start(t, "--min-upload-rate", "0", app("edges.ru"))
	type result struct {
		answer string
		after  time.Duration
	}
	// upload POSTs a body of size bytes to /echo, chunk bytes every
	// 100 ms for d, then the rest at once; it returns the answer's first
	// line and when it came.
	upload := func(s *server, size, chunk int, d time.Duration) <-chan result {
		return background(t, func(t testing.TB) result {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			began := time.Now()
			fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
			answered := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(c).ReadString('\n')
				answered <- strings.TrimSpace(line)
			}()
			sent := 0
			for tick := time.NewTicker(100 * time.Millisecond); time.Since(began) < d; <-tick.C {
				select {
				case line := <-answered:
					return result{line, time.Since(began)}
				default:
				}
				c.Write(bytes.Repeat([]byte("x"), chunk))
				sent += chunk
			}
			c.Write(bytes.Repeat([]byte("x"), size-sent))
			select {
			case line := <-answered:
				return result{line, time.Since(began)}
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer 30 s after the whole body")
				return result{}
			}
		})
	}
	const minute = 65 * time.Second             // the first minute, and a margin
	slow := upload(rated, 1000, 1, minute)      // 10 bytes a second
	slowOff := upload(off, 1000, 1, minute)     // the same, with the rate off
	fast := upload(rated, 300_000, 205, minute) // 2050 bytes a second
	r := <-slow
	equal(t, "a body slower than --min-upload-rate", r.answer, "HTTP/1.1 408 Request Timeout")
	if r.after < 58*time.Second {
		t.Errorf("the slow body got its 408 after %v: within the first minute", r.after.Round(time.Millisecond))
	}
	t.Logf("the slow body got its 408 after %v", r.after.Round(time.Millisecond))
	equal(t, "the same body with --min-upload-rate 0", (<-slowOff).answer, "HTTP/1.1 200 OK")
	equal(t, "a body faster than --min-upload-rate", (<-fast).answer, "HTTP/1.1 200 OK")
}
