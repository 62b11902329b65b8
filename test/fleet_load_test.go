package test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fleetLoad is the fleet tests' load generator: clients that send requests
// through the balancer until stopped, GET / and streams whose every byte is
// checked, counting answers by who gave them ("v1 host=h1").
type fleetLoad struct {
	url   string
	start time.Time
	stop  atomic.Bool
	wg    sync.WaitGroup

	mu        sync.Mutex
	ok        map[string]int // whole answers, by version and host
	problems  []fleetProblem
	streaming map[string]int // streams under way, by version and host
}

// fleetProblem is a request that failed, or a stream cut short.
type fleetProblem struct {
	at   time.Duration // since the load began
	req  string        // "GET /", "POST /echo", "GET /stream?n=10"
	cut  bool          // an answer that began well and ended short
	from string        // who answered, when known
	what string
}

func (p fleetProblem) String() string {
	kind := "failed"
	if p.cut {
		kind = "cut"
	}
	from := ""
	if p.from != "" {
		from = " from " + p.from
	}
	return fmt.Sprintf("%s at %v: %s%s: %s", kind, p.at.Round(time.Millisecond), p.req, from, p.what)
}

// fleetFigures is what the load saw up to a moment.
type fleetFigures struct {
	ok       map[string]int
	problems []fleetProblem
}

func (f fleetFigures) total() (n int) {
	for _, c := range f.ok {
		n += c
	}
	return n
}

func (f fleetFigures) failed() (n int) {
	for _, p := range f.problems {
		if !p.cut {
			n++
		}
	}
	return n
}

func (f fleetFigures) cut() int { return len(f.problems) - f.failed() }

// since is what happened after an earlier snapshot.
func (f fleetFigures) since(before fleetFigures) fleetFigures {
	d := fleetFigures{ok: map[string]int{}, problems: f.problems[len(before.problems):]}
	for k, v := range f.ok {
		if v > before.ok[k] {
			d.ok[k] = v - before.ok[k]
		}
	}
	return d
}

// byWho lists the answers by version and host, sorted.
func (f fleetFigures) byWho() string {
	keys := make([]string, 0, len(f.ok))
	for k := range f.ok {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d; ", k, f.ok[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

const fleetChunkSize = 1024 // FleetApp::CHUNK

// fleetChunk is chunk i of n of a stream from name, as FleetApp.chunk
// makes it.
func fleetChunk(name string, i, n int) string {
	line := fmt.Sprintf("%s %d/%d ", name, i, n)
	return line + strings.Repeat(".", fleetChunkSize-len(line)-1) + "\n"
}

var fleetName = regexp.MustCompile(`^v[12] host=h[123]$`)

// startFleetLoad starts clients sending requests to url (the balancer)
// until finish.
func startFleetLoad(url string, clients int) *fleetLoad {
	l := &fleetLoad{url: url, start: time.Now(), ok: map[string]int{}, streaming: map[string]int{}}
	for i := 0; i < clients; i++ {
		l.wg.Add(1)
		go l.client(i)
	}
	return l
}

// client sends GET / and POST /echo back to back (even clients), or
// streams: short ones (0.5 s) and some long ones (3 s, longer than
// --drain-delay: one begun as a host's drain begins outlasts it).
func (l *fleetLoad) client(i int) {
	defer l.wg.Done()
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
	defer c.CloseIdleConnections()
	for n := i; !l.stop.Load(); n++ {
		switch {
		case i%2 == 0 && n%2 == 0:
			l.root(c)
		case i%2 == 0:
			l.post(c, fmt.Sprintf("client %d request %d", i, n))
		case n%4 == 1:
			l.stream(c, 60)
		default:
			l.stream(c, 10)
		}
	}
}

func (l *fleetLoad) problem(p fleetProblem) {
	p.at = time.Since(l.start)
	l.mu.Lock()
	l.problems = append(l.problems, p)
	l.mu.Unlock()
}

func (l *fleetLoad) answered(who string) {
	l.mu.Lock()
	l.ok[who]++
	l.mu.Unlock()
}

func (l *fleetLoad) root(c *http.Client) {
	res, err := c.Get(l.url + "/")
	if err != nil {
		l.problem(fleetProblem{req: "GET /", what: err.Error()})
		return
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	who := strings.TrimSuffix(string(b), "\n")
	switch {
	case err != nil && res.StatusCode == 200 && fleetName.MatchString(who):
		// The whole text, but not the chunked body's end.
		l.problem(fleetProblem{req: "GET /", cut: true, from: who, what: fmt.Sprintf("%q, then %v", b, err)})
	case err != nil:
		l.problem(fleetProblem{req: "GET /", what: fmt.Sprintf("%d %q, then %v", res.StatusCode, b, err)})
	case res.StatusCode != 200 || !fleetName.MatchString(who) || !strings.HasSuffix(string(b), "\n"):
		l.problem(fleetProblem{req: "GET /", what: fmt.Sprintf("%d %q", res.StatusCode, b)})
	default:
		l.answered(who)
	}
}

// post POSTs body to /echo, which answers it back after who answers.
// Caddy retries a POST only when it could not connect: one that reaches a
// host that is closing is lost.
func (l *fleetLoad) post(c *http.Client, body string) {
	res, err := c.Post(l.url+"/echo", "text/plain", strings.NewReader(body))
	if err != nil {
		l.problem(fleetProblem{req: "POST /echo", what: err.Error()})
		return
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	who, echoed, _ := strings.Cut(string(b), " "+body)
	switch {
	case err != nil && res.StatusCode == 200 && fleetName.MatchString(who):
		l.problem(fleetProblem{req: "POST /echo", cut: true, from: who, what: fmt.Sprintf("%q, then %v", b, err)})
	case err != nil:
		l.problem(fleetProblem{req: "POST /echo", what: fmt.Sprintf("%d %q, then %v", res.StatusCode, b, err)})
	case res.StatusCode != 200 || !fleetName.MatchString(who) || echoed != "\n":
		l.problem(fleetProblem{req: "POST /echo", what: fmt.Sprintf("%d %q", res.StatusCode, b)})
	default:
		l.answered(who)
	}
}

// stream GETs a stream of n chunks and checks it byte for byte; the first
// chunk names who sends it.
func (l *fleetLoad) stream(c *http.Client, n int) {
	path := fmt.Sprintf("/stream?n=%d", n)
	began := time.Now()
	res, err := c.Get(l.url + path)
	if err != nil {
		l.problem(fleetProblem{req: "GET " + path, what: err.Error()})
		return
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		l.problem(fleetProblem{req: "GET " + path, what: fmt.Sprintf("%d %q", res.StatusCode, b)})
		return
	}
	first := make([]byte, fleetChunkSize)
	if got, err := io.ReadFull(res.Body, first); err != nil {
		l.problem(fleetProblem{req: "GET " + path, cut: true, what: fmt.Sprintf("%d bytes of the first chunk, then %v", got, err)})
		return
	}
	who, _, _ := strings.Cut(string(first), fmt.Sprintf(" 0/%d ", n))
	if !fleetName.MatchString(who) || string(first) != fleetChunk(who, 0, n) {
		l.problem(fleetProblem{req: "GET " + path, what: fmt.Sprintf("first chunk %q", first)})
		return
	}
	l.mu.Lock()
	l.streaming[who]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.streaming[who]--
		l.mu.Unlock()
	}()
	rest, err := io.ReadAll(res.Body)
	var want strings.Builder
	for i := 1; i < n; i++ {
		want.WriteString(fleetChunk(who, i, n))
	}
	switch {
	case len(rest) < want.Len() && strings.HasPrefix(want.String(), string(rest)):
		if err == nil {
			err = errors.New("the body ended")
		}
		l.problem(fleetProblem{req: "GET " + path, cut: true, from: who, what: fmt.Sprintf("%d of %d bytes in %v, then %v",
			fleetChunkSize+len(rest), fleetChunkSize*n, time.Since(began).Round(time.Millisecond), err)})
	case err != nil || string(rest) != want.String():
		l.problem(fleetProblem{req: "GET " + path, from: who, what: fmt.Sprintf("%d bytes that differ from what was sent (%v)",
			fleetChunkSize+len(rest), err)})
	default:
		l.answered(who)
	}
}

// snapshot is what the load saw so far, and the streams under way now.
func (l *fleetLoad) snapshot() (fleetFigures, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fleetFigures{ok: maps.Clone(l.ok), problems: append([]fleetProblem(nil), l.problems...)}, maps.Clone(l.streaming)
}

// count is how many whole answers who gave.
func (l *fleetLoad) count(who string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok[who]
}

// finish stops the clients once their requests under way end.
func (l *fleetLoad) finish() fleetFigures {
	l.stop.Store(true)
	l.wg.Wait()
	f, _ := l.snapshot()
	return f
}
