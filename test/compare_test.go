package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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

// pumaEnv is the RACK_ENV the reference server runs in: ruvoy is compared
// with it in the same (-e pumaEnv).
const pumaEnv = "production"

// puma runs the reference server on the rackup in dir.
func puma(t *testing.T, dir, rackup string, env []string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("puma", "-e", pumaEnv, "-t", "5:5", "-b", "tcp://127.0.0.1:"+port, rackup)
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

// framed is an HTTP/1 answer as its bytes framed it, read off a raw
// socket: what Go's client smooths over (Content-Length or chunked, a
// body after a HEAD, whether the connection stays).
type framed struct {
	status  string   // the status line
	headers []string // "name: value", the name lowercased, sorted; Date, and the framing's own, left out
	body    string   // chunks decoded, or Content-Length bytes, or up to the close
	framing string   // "no body", "length N" with its Content-Length, "chunked", "to the close", "unframed"; then ", closed" or ", kept"
}

func (f framed) String() string {
	return fmt.Sprintf("%s\n  %s\n  body %q", f.status, strings.Join(f.headers, "\n  "), f.body)
}

// framingHeaders are the headers that frame an answer: exchangeFramed
// reads them into framed.framing.
var framingHeaders = map[string]bool{"content-length": true, "transfer-encoding": true, "connection": true, "keep-alive": true}

// exchangeFramed sends request on a new connection to addr and reads the
// answer by its framing (a HEAD's, a 204's and a 304's has no body).
// Then, unless the answer ended with the connection, it sends next on the
// same connection: an answer to it says the connection was kept.
func exchangeFramed(t *testing.T, addr, request, next string) framed {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	line := func() string {
		t.Helper()
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%q to %s: after %q: %v", request, addr, l, err)
		}
		return strings.TrimRight(l, "\r\n")
	}
	var f framed
	f.status = line()
	var length, encoding, connection []string
	for h := line(); h != ""; h = line() {
		name, value, _ := strings.Cut(h, ":")
		name, value = strings.ToLower(name), strings.TrimSpace(value)
		switch name {
		case "date":
		case "content-length":
			length = append(length, value)
		case "transfer-encoding":
			encoding = append(encoding, strings.ToLower(value))
		case "connection", "keep-alive":
			connection = append(connection, name+": "+strings.ToLower(value))
		default:
			f.headers = append(f.headers, name+": "+value)
		}
	}
	sort.Strings(f.headers)
	if len(length) > 1 || (len(length) > 0 && len(encoding) > 0) || len(encoding) > 1 || (len(encoding) == 1 && encoding[0] != "chunked") {
		t.Fatalf("%q to %s: Content-Length %q, Transfer-Encoding %q: framed two ways", request, addr, length, encoding)
	}
	switch code := strings.Fields(f.status + " x x")[1]; {
	case strings.HasPrefix(request, "HEAD ") || code == "204" || code == "304":
		f.framing = "no body"
		if len(length) > 0 {
			f.framing += " (length " + length[0] + ")"
		}
	case len(encoding) > 0:
		f.framing = "chunked"
		var body strings.Builder
		for {
			size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line(), ";", 2)[0]), 16, 64)
			if err != nil {
				t.Fatalf("%q to %s: a chunk's size: %v", request, addr, err)
			}
			if size == 0 {
				for line() != "" { // trailers
				}
				break
			}
			if _, err := io.CopyN(&body, br, size); err != nil {
				t.Fatalf("%q to %s: a chunk: %v", request, addr, err)
			}
			if line() != "" {
				t.Fatalf("%q to %s: a chunk longer than its size", request, addr)
			}
		}
		f.body = body.String()
	case len(length) > 0:
		n, err := strconv.Atoi(length[0])
		if err != nil {
			t.Fatalf("%q to %s: Content-Length %q", request, addr, length[0])
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatalf("%q to %s: %d bytes of body: %v", request, addr, n, err)
		}
		f.body, f.framing = string(b), "length "+length[0]
	default:
		// Up to the close; a server that keeps the connection has sent an
		// answer whose end the client cannot tell.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(br)
		f.body, f.framing = string(b), "to the close, closed"
		if err != nil {
			f.framing = "unframed, kept"
		}
		return f
	}
	f.framing += ", closed"
	if _, err := io.WriteString(c, next); err == nil {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if l, err := br.ReadString('\n'); err == nil {
			if !strings.HasPrefix(l, "HTTP/1.") {
				t.Fatalf("%q to %s: after the answer, %q, not the next answer", request, addr, l)
			}
			f.framing = strings.TrimSuffix(f.framing, ", closed") + ", kept"
		}
	}
	if len(connection) > 0 {
		f.framing += " (" + strings.Join(connection, ", ") + ")"
	}
	return f
}

// A framingCase is a request and how each server may frame its answer:
// one way, or several ("a | b"). "delimited" stands for "length N" or
// "chunked", the server's choice when the app gave no length (both choose
// by when the body's parts come); puma "" is as ruvoy, "-" not checked (a
// Puma bug, said where the case is).
type framingCase struct{ request, ruvoy, puma string }

// framedAs says whether framing is one of the ways want allows.
func framedAs(framing, want string) bool {
	for _, w := range strings.Split(want, " | ") {
		if rest, ok := strings.CutPrefix(w, "delimited"); ok {
			if framing == "chunked"+rest || regexp.MustCompile(`^length \d+`+regexp.QuoteMeta(rest)+`$`).MatchString(framing) {
				return true
			}
		} else if framing == w {
			return true
		}
	}
	return false
}

// compareFraming sends each request to ruvoy and to the reference, each on
// a connection of its own: the answers must be the same but for their
// framing (status, headers, body), and each framed as the case says.
func compareFraming(t *testing.T, ruvoyAddr, referenceAddr string, cases []framingCase) {
	t.Helper()
	for _, c := range cases {
		next := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
		if strings.Contains(c.request, " HTTP/1.0\r\n") {
			next = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
		}
		a, b := exchangeFramed(t, ruvoyAddr, c.request, next), exchangeFramed(t, referenceAddr, c.request, next)
		if c.puma == "" {
			c.puma = c.ruvoy
		}
		switch {
		case a.String() != b.String():
			t.Errorf("%q: the answers differ\nruvoy: %s\nreference: %s", c.request, a, b)
		case !framedAs(a.framing, c.ruvoy):
			t.Errorf("%q: ruvoy framed it %q, want %q", c.request, a.framing, c.ruvoy)
		case c.puma != "-" && !framedAs(b.framing, c.puma):
			t.Errorf("%q: the reference framed it %q, want %q", c.request, b.framing, c.puma)
		default:
			t.Logf("%q: %s, %d bytes: the same; ruvoy: %s; the reference: %s", c.request, a.status, len(a.body), a.framing, b.framing)
		}
	}
}
