package test

import (
	"bytes"
	"context"
	"crypto/tls"
	"debug/buildinfo"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The hostile-client suite's tools: doors (cleartext HTTP/2, HTTPS), a
// raw HTTP/2 client that misbehaves, a well-behaved client that measures
// what it gets meanwhile, and the server's memory.

// door is how a test reaches a server: its scheme and how to dial it.
type door struct {
	name string
	tls  *tls.Config // nil: cleartext (HTTP/2 by prior knowledge)
}

// hostileServer starts hostile.ru behind a door, with args added.
func hostileServer(t *testing.T, d door, args ...string) (*server, string) {
	t.Helper()
	adminPort := freePort(t)
	args = append([]string{"--admin-port", adminPort}, args...)
	if d.tls != nil {
		c := makeCerts(t)
		d.tls.RootCAs = c.pool
		args = append(args, "--tls-cert", c.serverCert, "--tls-key", c.serverKey)
	} else {
		args = append(args, "--h2c")
	}
	return start(t, append(args, app("hostile.ru"))...), "http://127.0.0.1:" + adminPort
}

func doors() []door {
	return []door{{name: "h2c"}, {name: "tls", tls: &tls.Config{ServerName: "localhost"}}}
}

// dialH2 opens a connection that speaks HTTP/2 from its first byte: the
// preface, by prior knowledge or after TLS chose h2.
func dialH2(t *testing.T, addr string, d door) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if d.tls != nil {
		conf := d.tls.Clone()
		conf.NextProtos = []string{"h2"}
		c, err = tls.Dial("tcp", addr, conf)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	return c
}

// rawH2 is a client that writes HTTP/2 frames as it likes.
type rawH2 struct {
	conn    net.Conn
	mu      sync.Mutex // one frame written at a time: the reader acknowledges settings
	fr      *http2.Framer
	hb      bytes.Buffer
	enc     *hpack.Encoder
	next    uint32 // the next stream id
	resets  atomic.Int64
	streams atomic.Int64  // the server's SETTINGS_MAX_CONCURRENT_STREAMS, once read
	closed  chan struct{} // the server ended the connection (GOAWAY or EOF)
}

// newRawH2 opens a connection whose client sends settings, and reads what
// the server sends, acknowledging its settings, until the connection ends.
// With read false, it never reads (a client that stopped reading).
func newRawH2(t *testing.T, addr string, d door, read bool, settings ...http2.Setting) *rawH2 {
	t.Helper()
	c := dialH2(t, addr, d)
	h := &rawH2{conn: c, fr: http2.NewFramer(c, c), next: 1, closed: make(chan struct{})}
	h.enc = hpack.NewEncoder(&h.hb)
	t.Cleanup(func() { c.Close() })
	h.write(func(fr *http2.Framer) error { return fr.WriteSettings(settings...) })
	if read {
		go func() {
			defer close(h.closed)
			for {
				f, err := h.fr.ReadFrame()
				if err != nil {
					return
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
						h.streams.Store(int64(v))
					}
					if !f.IsAck() {
						h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
					}
				case *http2.RSTStreamFrame:
					h.resets.Add(1)
				case *http2.GoAwayFrame:
					return
				}
			}
		}()
	}
	return h
}

// write writes frames, one writer at a time.
func (h *rawH2) write(f func(*http2.Framer) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f(h.fr)
}

// head encodes a GET of path (with mu held: the encoder is shared).
func (h *rawH2) head(path string) []byte {
	h.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", path}} {
		h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return h.hb.Bytes()
}

// get opens a stream asking for path; it returns the stream's id.
func (h *rawH2) get(path string) (uint32, error) {
	var id uint32
	return id, h.write(func(fr *http2.Framer) error {
		id = h.next
		h.next += 2
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.head(path), EndStream: true, EndHeaders: true})
	})
}

// goodClient is a well-behaved client: HTTP/2 over the door, and one
// request at a time on each of its workers.
type goodClient struct {
	client *http.Client
	base   string
}

func newGoodClient(s *server, d door) *goodClient {
	tr := &http2.Transport{}
	if d.tls != nil {
		tr.TLSClientConfig = d.tls.Clone()
	}
	base := "https://" + s.addr
	if d.tls == nil {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		base = "http://" + s.addr
	}
	return &goodClient{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: base}
}

// run makes n requests for path, workers at a time, each checked byte for
// byte against want; it returns how many succeeded, and the latencies'
// median and 99th percentile.
func (g *goodClient) run(path, want string, n, workers int) (ok int, p50, p99 time.Duration, failure string) {
	var mu sync.Mutex
	var took []time.Duration
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				began := time.Now()
				res, err := g.client.Get(g.base + path)
				if err == nil {
					var b []byte
					b, err = io.ReadAll(res.Body)
					res.Body.Close()
					if err == nil && (res.StatusCode != 200 || string(b) != want) {
						err = fmt.Errorf("status %d, %d bytes", res.StatusCode, len(b))
					}
				}
				mu.Lock()
				if err == nil {
					ok++
					took = append(took, time.Since(began))
				} else {
					failure = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	if len(took) > 0 {
		p50, p99 = took[len(took)/2], took[len(took)*99/100]
	}
	return ok, p50, p99, failure
}

// memoryScale is what a memory bound is multiplied by for the binary
// under test: the race detector's shadow memory makes a process several
// times larger (CI runs the race build).
func memoryScale(t *testing.T) int {
	info, err := buildinfo.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return 4
		}
	}
	return 1
}

// rssMiB is a process's resident memory, in MiB.
func rssMiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int
			fmt.Sscan(rest, &kib)
			return kib >> 10
		}
	}
	return 0
}

// peakRSS samples a process's memory until stop is closed; the result
// channel then gets the largest sample, in MiB.
func peakRSS(pid int, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		peak := 0
		for {
			peak = max(peak, rssMiB(pid))
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
