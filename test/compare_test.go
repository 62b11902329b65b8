package test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A step of a conversation replayed against two servers.
type step struct {
	method, path string
	form         url.Values // sent as a form body
	token        bool       // add the CSRF token the previous page carried
}

// answer is what a server said, made comparable: values that differ from
// server to server or run to run (dates, ids of requests, CSRF tokens,
// cookie values, the port in a Location) are masked.
type answer struct {
	status  int
	headers []string
	body    string
}

// Headers a server is free to set its own way.
var ignoredHeaders = map[string]bool{
	"Date": true, "Etag": true, "X-Request-Id": true, "X-Runtime": true, "Server": true,
	"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
}

var tokenRe = regexp.MustCompile(`(name="authenticity_token" value="|name="csrf-token" content=")[^"]+"`)

func normalize(res *http.Response, body, base string) answer {
	body = strings.ReplaceAll(tokenRe.ReplaceAllString(body, `${1}TOKEN"`), base, "BASE")
	a := answer{status: res.StatusCode, body: body}
	for name, values := range res.Header {
		if ignoredHeaders[name] {
			continue
		}
		for _, v := range values {
			switch name {
			case "Set-Cookie":
				cookie, attrs, _ := strings.Cut(v, ";")
				cname, _, _ := strings.Cut(cookie, "=")
				v = cname + "=VALUE;" + attrs
			case "Location":
				v = strings.Replace(v, base, "BASE", 1)
			}
			a.headers = append(a.headers, name+": "+v)
		}
	}
	sort.Strings(a.headers)
	return a
}

type conversation struct {
	base   string
	client *http.Client
	token  string
}

func newConversation(base string) *conversation {
	jar, _ := cookiejar.New(nil)
	return &conversation{base: base, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var formTokenRe = regexp.MustCompile(`name="authenticity_token" value="([^"]+)"`)

func (c *conversation) do(t *testing.T, s step) answer {
	t.Helper()
	var body io.Reader
	form := url.Values{}
	for k, v := range s.form {
		form[k] = v
	}
	if s.token {
		form.Set("authenticity_token", c.token)
	}
	if s.form != nil || s.token {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(s.method, c.base+s.path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", s.method, s.path, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading: %v", s.method, s.path, err)
	}
	if m := formTokenRe.FindSubmatch(b); m != nil {
		c.token = string(m[1])
	}
	return normalize(res, string(b), c.base)
}

// compareServers replays steps against ruvoy and the reference server and
// fails on the first answer that differs.
func compareServers(t *testing.T, ruvoyURL, referenceURL string, steps []step) {
	t.Helper()
	ours, theirs := newConversation(ruvoyURL), newConversation(referenceURL)
	for i, s := range steps {
		a, b := ours.do(t, s), theirs.do(t, s)
		where := fmt.Sprintf("step %d, %s %s", i+1, s.method, s.path)
		if a.status != b.status {
			t.Fatalf("%s: status %d under ruvoy, %d under the reference\nruvoy body: %s", where, a.status, b.status, a.body)
		}
		if strings.Join(a.headers, "\n") != strings.Join(b.headers, "\n") {
			t.Fatalf("%s: headers differ\nruvoy:\n  %s\nreference:\n  %s", where,
				strings.Join(a.headers, "\n  "), strings.Join(b.headers, "\n  "))
		}
		if a.body != b.body {
			t.Fatalf("%s: bodies differ\nruvoy:\n%s\nreference:\n%s", where, a.body, b.body)
		}
		t.Logf("%s: %d, %d headers, %d bytes: the same", where, a.status, len(a.headers), len(a.body))
	}
}

// puma runs the reference server on the rackup in dir.
func puma(t *testing.T, dir, rackup string, env []string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("puma", "-e", "production", "-t", "5:5", "-b", "tcp://127.0.0.1:"+port, rackup)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &output{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("puma: %v", err)
	}
	t.Cleanup(func() {
		// Puma waits for its threads without a limit (force_shutdown_after):
		// one a client left in a hijacked or streamed answer kept Puma 6.6
		// alive, and the test with it.
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("puma output:\n%s", out)
		}
	})
	s := &server{addr: "127.0.0.1:" + port, done: make(chan struct{})}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get("http://" + s.addr + "/"); err == nil {
			r.Body.Close()
			return "http://" + s.addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("puma did not start:\n%s", out)
	return ""
}

// copyTree copies an example app, so that databases and logs the runs make
// stay out of the source tree.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}
