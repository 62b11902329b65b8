package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
