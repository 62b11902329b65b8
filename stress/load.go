package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// counts accumulate over the whole run.
type counts struct {
	total, ok, expected503, transport, unexpected atomic.Int64
	steadyFailed, recoveryFailed, controlFailed   atomic.Int64
	controlMaxNs                                  atomic.Int64
	samples                                       sync.Map // a few failure descriptions
	nsamples                                      atomic.Int64
}

func (c *counts) note(what string) {
	if c.nsamples.Add(1) <= 10 {
		c.samples.Store(what, true)
	}
}

// kind says how an answer is judged.
type kind int

const (
	steady   kind = iota // must be 200
	overload             // 200 or an expected 503
	recovery             // must be 200
)

func (c *counts) judge(k kind, what string, status int, err error) {
	c.total.Add(1)
	switch {
	case err != nil:
		c.transport.Add(1)
		c.note(fmt.Sprintf("%s: %v", what, err))
	case status == 200:
		c.ok.Add(1)
		return
	case status == 503 && k == overload:
		c.expected503.Add(1)
		return
	default:
		c.unexpected.Add(1)
		c.note(fmt.Sprintf("%s: status %d", what, status))
	}
	switch k {
	case steady:
		c.steadyFailed.Add(1)
	case recovery:
		c.recoveryFailed.Add(1)
	}
}

func newClient(h2c bool, conns int) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// call makes one request and reads the whole answer.
func call(c *http.Client, method, url string, body []byte) (int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, err
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return res.StatusCode, err
	}
	return res.StatusCode, nil
}

// load runs workers that repeat one request until ctx ends.
type load struct {
	name    string
	workers int
	h2c     bool
	method  string
	path    string
	body    []byte
	kind    kind
}

func (h *harness) run(ctx context.Context, loads ...load) {
	var wg sync.WaitGroup
	for _, l := range loads {
		c := newClient(l.h2c, l.workers)
		for i := 0; i < l.workers; i++ {
			wg.Add(1)
			go func(l load) {
				defer wg.Done()
				for ctx.Err() == nil {
					status, err := call(c, l.method, h.main+l.path, l.body)
					if ctx.Err() != nil && err != nil {
						return // cut off by the phase's end, not the server
					}
					h.counts.judge(l.kind, l.name, status, err)
					if status == 503 {
						// As a client honouring Retry-After would, if briefly:
						// the admitted budget stays full, the CPU is not all
						// spent on refusals.
						time.Sleep(10 * time.Millisecond)
					}
				}
			}(l)
		}
		defer c.CloseIdleConnections()
	}
	wg.Wait()
}

// probeControl asks the control listener every 100 ms and keeps the
// slowest answer.
func (h *harness) probeControl(ctx context.Context) {
	c := newClient(false, 1)
	defer c.CloseIdleConnections()
	everyTick(ctx, func() {
		began := time.Now()
		status, err := call(c, "GET", h.control+"/noop", nil)
		took := time.Since(began)
		h.lat.add("control", took)
		if err != nil || status != 200 {
			h.counts.controlFailed.Add(1)
			h.counts.note(fmt.Sprintf("control: %d %v", status, err))
		}
		for {
			old := h.counts.controlMaxNs.Load()
			if int64(took) <= old || h.counts.controlMaxNs.CompareAndSwap(old, int64(took)) {
				break
			}
		}
	})
}

// everyTick calls probe every 100 ms until ctx ends.
func everyTick(ctx context.Context, probe func()) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			probe()
		}
	}
}

// cancelled makes n requests whose clients leave: half mid-upload, half
// mid-response.
func (h *harness) cancelled(n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", h.mainAddr)
			if err != nil {
				h.counts.transport.Add(1)
				h.counts.note("cancelled: " + err.Error())
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if i%2 == 0 {
				io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
				c.Write(make([]byte, 100_000))
				time.Sleep(20 * time.Millisecond)
			} else {
				io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
				io.CopyN(io.Discard, c, 100_000)
			}
		}(i)
	}
	wg.Wait()
}
