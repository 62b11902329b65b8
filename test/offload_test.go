package test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	extOnce sync.Once
	extDir  string
	extErr  error
)

// buildBlockingExt builds test/ext/blocking (mkmf) into a temporary
// directory once per test run (TestMain removes it) and tells the apps
// where it is.
func buildBlockingExt(t *testing.T) {
	t.Helper()
	extOnce.Do(func() {
		extDir, extErr = os.MkdirTemp("", "ruvoy-blocking-ext")
		if extErr != nil {
			return
		}
		for _, f := range []string{"extconf.rb", "blocking.c"} {
			b, err := os.ReadFile(filepath.Join("ext", "blocking", f))
			if err != nil {
				extErr = err
				return
			}
			os.WriteFile(filepath.Join(extDir, f), b, 0o644)
		}
		for _, cmd := range [][]string{{"ruby", "extconf.rb"}, {"make"}} {
			c := exec.Command(cmd[0], cmd[1:]...)
			c.Dir = extDir
			if out, err := c.CombinedOutput(); err != nil {
				extErr = &buildError{cmd: strings.Join(cmd, " "), out: string(out)}
				return
			}
		}
	})
	if extErr != nil {
		t.Fatal(extErr)
	}
	t.Setenv("RUVOY_TEST_EXT", extDir)
}

type buildError struct{ cmd, out string }

func (e *buildError) Error() string { return e.cmd + ": " + e.out }

// 20 concurrent requests each making a 50 ms call that blocks after
// releasing the GVL: on the VM thread they queue (about 1 s in all);
// offloaded they overlap (about 50 ms); through a pool of 4, five rounds.
func TestOffloadOverlapsBlockingCalls(t *testing.T) {
	buildBlockingExt(t)
	s := start(t, "--hold-warn", "0", app("offload.ru"))
	s.get(t, "/offload?ms=1") // warm up: the pool's first threads
	s.get(t, "/limited?ms=1")
	cases := []struct {
		path, want string
		min, max   time.Duration
	}{
		{"/block?ms=50", "blocked", 900 * time.Millisecond, 3 * time.Second},
		{"/offload?ms=50", "offloaded", 45 * time.Millisecond, 400 * time.Millisecond},
		{"/limited?ms=50", "limited", 240 * time.Millisecond, 900 * time.Millisecond},
	}
	for _, c := range cases {
		took := concurrently(t, s, 20, c.path, c.want)
		t.Logf("20 x %s: %v", c.path, took)
		if took < c.min || took > c.max {
			t.Errorf("20 x %s took %v, want %v to %v", c.path, took, c.min, c.max)
		}
	}
}

func TestOffloadValuesAndExceptions(t *testing.T) {
	buildBlockingExt(t)
	s := start(t, app("offload.ru"))
	equal(t, "value", s.get(t, "/value").body, "42")
	r := s.get(t, "/raise")
	if !strings.HasPrefix(r.body, "ArgumentError: raised in the offload thread at ") || !strings.Contains(r.body, "offload.ru:") {
		t.Fatalf("the exception did not cross with its backtrace: %q", r.body)
	}
	equal(t, "thread-locals are the offload thread's", s.get(t, "/thread-local").body, "nil")
}

// A client that leaves during an offloaded call: the call completes, then
// the fiber unwinds and its ensure runs.
func TestOffloadClientLeavesMidCall(t *testing.T) {
	buildBlockingExt(t)
	s := start(t, app("offload.ru"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/leave?ms=500", nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("the client should have left")
	}
	eventually(t, 5*time.Second, "the call and the ensure", func() bool {
		return s.get(t, "/events").body == `["block done","ensure ran"]`
	})
}

// A call that holds the GVL holds the VM thread: the hold detector logs
// the request and the backtrace line of the call. (It is set here by
// --stall-warn, --hold-warn's former name, which says so.)
func TestOffloadHoldDetectorNamesTheLine(t *testing.T) {
	buildBlockingExt(t)
	s := start(t, "--stall-warn", "100", app("offload.ru"))
	mustContain(t, "stderr", s.stderr.String(), "ruvoy: --stall-warn is deprecated: it is now --hold-warn (same value)")
	equal(t, "body", s.get(t, "/stall?ms=300").body, "stalled")
	entry := waitLog(t, s, "the VM thread is held by one request: other requests wait (wrap blocking calls in Ruvoy.offload)",
		"path", "/stall")
	bt, _ := entry["backtrace"].([]any)
	if len(bt) == 0 || !strings.Contains(bt[0].(string), "offload.ru:") || !strings.Contains(bt[0].(string), "sleep_gvl") {
		t.Fatalf("the backtrace does not start at the blocking call: %v", entry["backtrace"])
	}
	src, _ := os.ReadFile(app("offload.ru"))
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "Blocking.sleep_gvl(ms)") {
			line = i + 1
		}
	}
	mustContain(t, "backtrace line", bt[0].(string), "offload.ru:"+strconv.Itoa(line))
	equal(t, "method", entry["method"], any("GET"))
	if len(bt) > 11 {
		t.Fatalf("the backtrace has %d lines, want the app's first and 10 at most: %v", len(bt), bt)
	}
	if held, ok := entry["held_ms"].(float64); !ok || held < 100 {
		t.Fatalf("held_ms is %#v, want a number of at least 100", entry["held_ms"])
	}
}
