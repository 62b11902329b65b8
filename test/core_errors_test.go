package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logLines returns the JSON log entries on stderr whose msg is msg.
func logLines(s *server, msg string) []map[string]any {
	var found []map[string]any
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == msg {
			found = append(found, entry)
		}
	}
	return found
}

func waitLog(t *testing.T, s *server, msg, field, value string) map[string]any {
	t.Helper()
	var hit map[string]any
	eventually(t, 5*time.Second, "log entry "+msg+" with "+field+"="+value, func() bool {
		for _, e := range logLines(s, msg) {
			if v, _ := e[field].(string); strings.Contains(v, value) {
				hit = e
				return true
			}
		}
		return false
	})
	return hit
}

func TestCoreAppRaises(t *testing.T) {
	s := start(t, app("core.ru"))
	r := s.get(t, "/raise")
	equal(t, "status", r.status, 500)
	equal(t, "body", r.body, "Internal Server Error\n")
	entry := waitLog(t, s, "the app raised", "error", "raised on purpose")
	equal(t, "error_class", entry["error_class"], any("ArgumentError"))
	equal(t, "path", entry["path"], any("/raise"))
	bt, _ := json.Marshal(entry["backtrace"])
	mustContain(t, "backtrace", string(bt), "core.ru:")
	equal(t, "the next request", s.get(t, "/raw/hello").body, "hello world")
}

func TestCoreBodyFailures(t *testing.T) {
	s := start(t, app("core.ru"))

	// each raises before yielding anything: a clean 500, close called.
	r := s.get(t, "/raise-each?name=first&after=0")
	equal(t, "status", r.status, 500)
	equal(t, "close", s.get(t, "/closed?name=first").body, "1")

	// each raises once its first chunk is on the wire: the body is cut
	// short, visibly (no terminating chunk), and close is called.
	res, err := client.Get(s.url + "/raise-late?name=late")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "status", res.StatusCode, 200)
	if err == nil {
		t.Fatalf("a body that failed midway read as complete: %q", body)
	}
	equal(t, "bytes before the cut", string(body), "one")
	waitLog(t, s, "the response body raised", "error", "late failure")
	equal(t, "close", s.get(t, "/closed?name=late").body, "1")

	// A complete body: close called once.
	equal(t, "body", s.get(t, "/counted?name=ok").body, "onetwo")
	equal(t, "close", s.get(t, "/closed?name=ok").body, "1")
}

func TestCoreMalformedResponses(t *testing.T) {
	s := start(t, app("core.ru"))
	for _, path := range []string{"status", "status-range", "chunk", "header-crlf", "header-nul",
		"header-name", "not-triple", "nil", "body", "short", "long"} {
		r := s.get(t, "/malformed/"+path)
		if r.status != 500 || r.body != "Internal Server Error\n" {
			t.Errorf("/malformed/%s: got %d %q, want a 500", path, r.status, r.body)
		}
		if r.header.Get("Set-Cookie") != "" || r.header.Get("X-Evil") != "" {
			t.Errorf("/malformed/%s: a bad header reached the client: %v", path, r.header)
		}
	}
	eventually(t, 5*time.Second, "a log entry for each malformed response", func() bool {
		return len(logLines(s, "the app returned a malformed response")) >= 11
	})

	// A non-String chunk after the head went out: cut short, not a 500.
	res, err := client.Get(s.url + "/malformed/chunk-late")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || err == nil || string(body) != "first" {
		t.Fatalf("chunk-late: got %d %q (err %v), want 200, \"first\", then a cut", res.StatusCode, body, err)
	}
	equal(t, "still serving", s.get(t, "/raw/hello").body, "hello world")
}

func TestCoreCloseWhenClientLeaves(t *testing.T) {
	s := start(t, app("core.ru"))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/slow-counted?name=gone", nil)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(res.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	res.Body.Close()
	eventually(t, 5*time.Second, "close after the client left", func() bool {
		return s.get(t, "/closed?name=gone").body == "1"
	})
}

func TestCoreResponseFinished(t *testing.T) {
	s := start(t, app("core.ru"))
	equal(t, "body", s.get(t, "/finished?name=done").body, "finished")

	// A client that leaves while the app still works.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/finished?name=left&s=2", nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("the request should have timed out")
	}
	want := []string{
		`{"name":"done-after-reply"}`,
		`{"error":null,"name":"done","status":200}`,
		`{"name":"left-after-reply"}`,
		`{"error":"Ruvoy::ClientDisconnected","name":"left","status":null}`,
	}
	eventually(t, 5*time.Second, "hooks for both requests", func() bool {
		var got []map[string]any
		json.Unmarshal([]byte(s.get(t, "/finished-log").body), &got)
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			b, _ := json.Marshal(got[i])
			if string(b) != want[i] {
				t.Logf("hook %d: got %s, want %s", i, b, want[i])
				return false
			}
		}
		return true
	})
}

// Ruby maps a new fiber's stack at its first switch, and under a memory
// limit that fails. With 512 MiB fiber stacks and an address-space limit
// set once the server is up, only the stacks Ruby mapped at boot can be
// had: the requests past them must get a 503 and a log line, not hang,
// and the server must go on serving.
func TestCoreFiberThatCannotStart(t *testing.T) {
	mode, _ := os.ReadFile("/proc/sys/vm/overcommit_memory")
	need(t, strings.TrimSpace(string(mode)) != "2",
		"vm.overcommit_memory other than 2: under strict overcommit Ruby cannot map 512 MiB fiber stacks at boot")
	port := freePort(t)
	s := launchIn(t, "", []string{fmt.Sprintf("RUBY_FIBER_MACHINE_STACK_SIZE=%d", 512<<20)},
		port, "-p", port, app("core.ru"))
	s.waitReady(t)
	limitAddressSpace(t, s.cmd.Process.Pid, 256<<20)

	const n = 48 // more than the 32 stacks Ruby's fiber pool maps at boot
	answers := make(chan string, n)
	for i := 0; i < n; i++ {
		go func() { answers <- statusAndBody(s.url + "/sleep?s=0.5") }()
	}
	ok, refused := 0, 0
	for i := 0; i < n; i++ {
		switch a := <-answers; {
		case strings.HasPrefix(a, "200 "):
			ok++
		case a == "503 Service Unavailable\n":
			refused++
		default:
			t.Errorf("a request got %q", a)
		}
	}
	if refused == 0 {
		t.Fatalf("all %d requests got a fiber: the limit did not bite", ok)
	}
	t.Logf("%d served, %d refused", ok, refused)
	entry := waitLog(t, s, "the request's fiber could not start", "error_class", "FiberError")
	equal(t, "path", entry["path"], any("/sleep"))
	equal(t, "a request after them", s.get(t, "/raw/hello").body, "hello world")
}

// limitAddressSpace caps pid's address space at what it maps now plus room.
func limitAddressSpace(t *testing.T, pid int, room uint64) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kib uint64
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmSize:") {
			fmt.Sscanf(strings.TrimPrefix(line, "VmSize:"), "%d", &kib)
		}
	}
	if kib == 0 {
		t.Fatalf("no VmSize in /proc/%d/status", pid)
	}
	limit := unix.Rlimit{Cur: kib<<10 + room, Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &limit, nil); err != nil {
		t.Fatal(err)
	}
}
