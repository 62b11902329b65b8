package test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

type stats struct {
	LiveObjects int `json:"live_objects"`
	FDs         int `json:"fds"`
	Threads     int `json:"threads"`
	Goroutines  int
}

// stats are the app's figures and the server's goroutines; a figure
// missing or unread fails the test (0 against 0 would pass any check).
func (s *server) stats(t *testing.T, admin string) stats {
	t.Helper()
	var st stats
	r := s.get(t, "/stats")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || r.status != 200 {
		t.Fatalf("GET /stats: %d %q (%v)", r.status, r.body, err)
	}
	if st.LiveObjects <= 0 || st.FDs <= 0 || st.Threads <= 0 {
		t.Fatalf("GET /stats: a figure is missing: %q", r.body)
	}
	res, err := adminDo("GET", admin+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if _, err := fmt.Sscanf(string(b), "goroutine profile: total %d", &st.Goroutines); err != nil || res.StatusCode != 200 || st.Goroutines <= 0 {
		t.Fatalf("the goroutine profile: %d, %v: %.200q", res.StatusCode, err, b)
	}
	return st
}

// leave makes one request and walks away at a random point: before the
// request is complete, mid-upload, or after part of the response.
func leave(t *testing.T, addr string, rng *rand.Rand) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	switch rng.Intn(5) {
	case 0: // half a request line
		io.WriteString(c, "GET /sleep?s=0.05 HT")
	case 1: // waits, then leaves while the app sleeps
		io.WriteString(c, "GET /sleep?s=0.05 HTTP/1.1\r\nHost: x\r\n\r\n")
		time.Sleep(time.Duration(rng.Intn(60)) * time.Millisecond)
	case 2: // part of a streamed response
		io.WriteString(c, "GET /slow-counted?name=leak HTTP/1.1\r\nHost: x\r\n\r\n")
		io.CopyN(io.Discard, c, int64(rng.Intn(20000)))
	case 3: // mid-upload
		io.WriteString(c, "POST /env HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
		c.Write([]byte(strings.Repeat("x", rng.Intn(50000))))
	case 4: // a whole request, then gone before reading
		io.WriteString(c, "GET /raw/hello HTTP/1.1\r\nHost: x\r\n\r\n")
	}
}

// 1,000 requests whose clients vanish at random points leave file
// descriptors, goroutines, threads and Ruby's live objects where they were.
func TestCoreDisconnectsLeaveNothing(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("core.ru"))
	rng := rand.New(rand.NewSource(1))

	burst := func(n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 50)
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			r := rand.New(rand.NewSource(rng.Int63()))
			go func() {
				defer wg.Done()
				leave(t, s.addr, r)
				<-sem
			}()
		}
		wg.Wait()
	}
	settle := func() {
		// Every request's slot is back once the server counts none live.
		time.Sleep(1500 * time.Millisecond)
	}
	burst(200) // warm up: first uses allocate what stays
	settle()
	s.stats(t, admin) // opens the keep-alive connections the next calls reuse
	before := s.stats(t, admin)
	burst(1000)
	settle()
	var after stats
	eventually(t, 10*time.Second, "resources back to where they were", func() bool {
		after = s.stats(t, admin)
		return after.FDs <= before.FDs && after.Threads <= before.Threads &&
			after.Goroutines <= before.Goroutines+5 && after.LiveObjects <= before.LiveObjects+1000
	})
	t.Logf("before %+v, after %+v", before, after)
	equal(t, "still serving", s.get(t, "/raw/hello").body, "hello world")
}
