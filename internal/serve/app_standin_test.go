//go:build standin

package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/host"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// The request path against the stand-in VM (host's standin.go): quick
// checks of what the end-to-end tests prove against Ruby, run with
// `go test -race -tags standin ./internal/serve` (make unit).

var (
	testRT   *Runtime
	testOnce sync.Once
	standin  = host.Standin
)

// load loads app into the one runtime the tests share, as an app.
func load(t *testing.T, app host.StandInApp, o AppOptions) *App {
	t.Helper()
	testOnce.Do(func() { testRT = newRuntime(Options{}) })
	standin.Load(app)
	a, err := testRT.Load("config.ru", "test", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eventually(t, "every stream freed", func() bool { return testRT.streams.inUse() == 0 })
		a.Close()
	})
	return a
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
	}
}

// hello answers every request "hello <path>" in one message.
func hello(vm *host.StandIn, stream uint64, head wire.RequestHead) {
	body := "hello " + head.Fields[wire.FieldPath]
	vm.Head(stream, 200, int64(len(body)), body, wire.FlagEnd|wire.FlagFinal)
}

func get(a http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w
}

// Requests one after another and many at once each get their own answer
// whole; every slot is freed and reused, under a new id each time (its use
// count), so a message for an ended request reaches no later one.
func TestStandinServesAndReusesSlots(t *testing.T) {
	a := load(t, hello, AppOptions{})
	for i := range 200 {
		w := get(a, fmt.Sprintf("/%d", i))
		if w.Code != 200 || w.Body.String() != fmt.Sprintf("hello /%d", i) {
			t.Fatalf("request %d: %d %q", i, w.Code, w.Body)
		}
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				path := fmt.Sprintf("/%d/%d", i, j)
				if w := get(a, path); w.Body.String() != "hello "+path {
					t.Errorf("%s: %q", path, w.Body)
				}
			}
		}()
	}
	wg.Wait()
	eventually(t, "every stream freed", func() bool { return testRT.streams.inUse() == 0 })
	// The ids the VM was given: each slot's reuse has a new one.
	seen := map[uint64]bool{}
	for _, m := range standin.Sent(0) {
		if m.Kind == wire.InRequest {
			if seen[m.Stream] {
				t.Fatalf("stream id %x given twice", m.Stream)
			}
			seen[m.Stream] = true
		}
	}
	// A late message for an ended request is dropped.
	var old uint64
	for id := range seen {
		old = id
		break
	}
	standin.Data(old, "late", wire.FlagEnd|wire.FlagFinal)
	if w := get(a, "/after"); w.Body.String() != "hello /after" {
		t.Fatalf("after a late message: %q", w.Body)
	}
}

// gate holds each request until it is opened.
type gate struct {
	open    chan struct{}
	started atomic.Int64
}

func (g *gate) app(vm *host.StandIn, stream uint64, head wire.RequestHead) {
	g.started.Add(1)
	<-g.open
	hello(vm, stream, head)
}

// At most max-requests requests are in the VM at once; the others get 503
// with Retry-After at once, and their places come back.
func TestStandinAdmission(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	a := load(t, g.app, AppOptions{MaxRequests: 4})
	codes := make(chan int, 10)
	for i := range 10 {
		go func() { codes <- get(a, fmt.Sprintf("/%d", i)).Code }()
	}
	eventually(t, "4 requests in the VM", func() bool { return g.started.Load() == 4 })
	refused := 0
	for range 6 {
		if c := <-codes; c != 503 {
			t.Fatalf("over max-requests: %d", c)
		}
		refused++
	}
	close(g.open)
	for range 4 {
		if c := <-codes; c != 200 {
			t.Fatalf("admitted: %d", c)
		}
	}
	if w := get(a, "/again"); w.Code != 200 {
		t.Fatalf("after the places came back: %d", w.Code)
	}
}

// An HTTP/2 connection has at most max-requests-per-connection requests in
// the VM; its others wait, holding no place, until one ends; one whose
// client resets it while it waits leaves without a place.
func TestStandinPlacesPerConnection(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	a := load(t, g.app, AppOptions{MaxRequests: 100, MaxRequestsPerConnection: 2})
	conn, _ := net.Pipe()
	defer conn.Close()
	ctx := WithConn(context.Background(), conn)
	h2 := func(ctx context.Context, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil).WithContext(ctx)
		r.ProtoMajor, r.Proto = 2, "HTTP/2.0"
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		return w
	}
	done := make(chan *httptest.ResponseRecorder, 5)
	for i := range 4 {
		go func() { done <- h2(ctx, fmt.Sprintf("/%d", i)) }()
	}
	eventually(t, "2 in the VM, 2 waiting", func() bool {
		return g.started.Load() == 2 && testRT.counters.connQueued.Load() == 2
	})
	reset, cancel := context.WithCancel(ctx)
	go func() { done <- h2(reset, "/reset") }()
	eventually(t, "3 waiting", func() bool { return testRT.counters.connQueued.Load() == 3 })
	cancel()
	eventually(t, "the reset one gone", func() bool { return testRT.counters.connQueued.Load() == 2 })
	if w := <-done; w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("the reset request: %d %q", w.Code, w.Body)
	}
	if started := g.started.Load(); started != 2 {
		t.Fatalf("%d in the VM with the connection's places taken", started)
	}
	// Another connection is not held up meanwhile: its request reaches
	// the VM while this one's still wait.
	other := WithConn(context.Background(), conn)
	go func() { done <- h2(other, "/other") }()
	eventually(t, "another connection's request in the VM", func() bool { return g.started.Load() == 3 })
	if n := testRT.counters.connQueued.Load(); n != 2 {
		t.Fatalf("%d waiting for a place of their own connection, want this one's 2", n)
	}
	close(g.open)
	for range 5 {
		if w := <-done; w.Code != 200 {
			t.Fatalf("%d", w.Code)
		}
	}
}

// The responder holds the head until body bytes follow it or the batch
// ends: a body that fails before its first byte is a clean 500; one that
// fails after is cut, and what came before it is delivered first.
func TestStandinResponder(t *testing.T) {
	apps := map[string]host.StandInApp{
		"/reset-first": func(vm *host.StandIn, stream uint64, _ wire.RequestHead) {
			// One batch, as the VM sends a head its body's failure
			// follows at once.
			vm.Send(host.HeadMsg(stream, 200, -1, "", 0), msg.New(wire.OutReset, stream, wire.FlagEnd|wire.FlagFinal, 0, 0))
		},
		"/parts": func(vm *host.StandIn, stream uint64, _ wire.RequestHead) {
			vm.Head(stream, 200, -1, "part1", 0)
			time.Sleep(5 * time.Millisecond) // another batch
			vm.Data(stream, "part2", 0)
			time.Sleep(5 * time.Millisecond)
			vm.Send(msg.New(wire.OutReset, stream, wire.FlagEnd|wire.FlagFinal, 0, 0))
		},
		"/worker-died": func(vm *host.StandIn, stream uint64, _ wire.RequestHead) {
			vm.Send(msg.New(wire.OutReset, stream, wire.FlagEnd|wire.FlagFinal, http.StatusBadGateway, 0))
		},
	}
	a := load(t, func(vm *host.StandIn, stream uint64, head wire.RequestHead) {
		apps[head.Fields[wire.FieldPath]](vm, stream, head)
	}, AppOptions{})
	w := get(a, "/reset-first")
	if w.Code != 500 || !strings.Contains(w.Body.String(), "Internal Server Error") {
		t.Fatalf("a body failing before its first byte: %d %q", w.Code, w.Body)
	}
	if w := get(a, "/worker-died"); w.Code != 502 {
		t.Fatalf("a request whose worker died: %d", w.Code)
	}
	w = httptest.NewRecorder()
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("a body failing midway: panic %v, want http.ErrAbortHandler (the cut)", p)
			}
		}()
		a.ServeHTTP(w, httptest.NewRequest("GET", "/parts", nil))
	}()
	if w.Code != 200 || w.Body.String() != "part1part2" || !w.Flushed {
		t.Fatalf("a body failing midway: %d %q (flushed: %v), want both parts out before the cut", w.Code, w.Body, w.Flushed)
	}
}

// One client address (an IPv6 one by its /64) has at most
// max-requests-per-client requests in the VM, over all its connections:
// the rest get 503 with Retry-After at once, or wait the queue timeout for
// one of its own to end; other clients are served meanwhile, and a peer
// that is no address (a unix socket's) is not counted.
func TestStandinPlacesPerClient(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	a := load(t, g.app, AppOptions{MaxRequests: 100, MaxRequestsPerClient: 2})
	from := func(addr, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		return w
	}
	codes := make(chan int, 10)
	for i, addr := range []string{"[2001:db8::1]:1000", "[2001:db8::2]:1001", "[2001:db8::3]:1002", "[2001:db8::4]:1003"} {
		go func() { codes <- from(addr, fmt.Sprintf("/v6/%d", i)).Code }()
	}
	eventually(t, "2 of the /64's in the VM", func() bool { return g.started.Load() == 2 })
	for range 2 {
		if w := <-codes; w != 503 {
			t.Fatalf("over the client's places: %d, want 503", w)
		}
	}
	if c := testRT.counters.rejectedClient.Load(); c < 2 {
		t.Fatalf("refusals counted for the client: %d", c)
	}
	// Another client, and peers that are no address, are admitted.
	for i, addr := range []string{"192.0.2.7:1", "@", "@"} {
		go func() { codes <- from(addr, fmt.Sprintf("/other/%d", i)).Code }()
	}
	eventually(t, "the others in the VM", func() bool { return g.started.Load() == 5 })
	close(g.open)
	for range 5 {
		if c := <-codes; c != 200 {
			t.Fatalf("admitted: %d", c)
		}
	}
	eventually(t, "no client counted once their requests ended", func() bool {
		a.admit.clients.mu.Lock()
		defer a.admit.clients.mu.Unlock()
		return len(a.admit.clients.held) == 0
	})

	// With a queue timeout a request over its client's places waits for
	// one of them.
	g2 := &gate{open: make(chan struct{})}
	b := load(t, g2.app, AppOptions{MaxRequests: 100, MaxRequestsPerClient: 1, QueueTimeout: 10 * time.Second})
	for i := range 2 {
		go func() {
			r := httptest.NewRequest("GET", fmt.Sprintf("/q/%d", i), nil)
			w := httptest.NewRecorder()
			b.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	eventually(t, "one in the VM, one waiting", func() bool {
		return g2.started.Load() == 1 && testRT.counters.queued.Load() == 1
	})
	close(g2.open)
	for range 2 {
		if c := <-codes; c != 200 {
			t.Fatalf("a request that waited for its client's place: %d", c)
		}
	}
}
