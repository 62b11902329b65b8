package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const secretKeyBase = "ruvoy-tests-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// railsExample is the example app for the Rails this machine has:
// examples/rails (Rails 6.1, Debian 12) or examples/rails72 (Rails 7.2,
// Debian 13). Each is locked to its Rails.
func railsExample(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("ruby", "-e", `require "rails/version"; print Rails::VERSION::STRING`).Output()
	if err != nil {
		t.Fatalf("which Rails: %v (make setup-test installs it)", err)
	}
	if strings.HasPrefix(string(out), "7.2.") {
		return "../examples/rails72"
	}
	return "../examples/rails"
}

// railsApp copies the Rails example and migrates its database. It is
// served over cleartext: Rails 7.2's force_ssl is turned off.
func railsApp(t *testing.T, env ...string) (string, []string) {
	t.Helper()
	dir := copyTree(t, railsExample(t))
	env = append([]string{"RAILS_ENV=production", "SECRET_KEY_BASE=" + secretKeyBase, "RAILS_SERVE_STATIC_FILES=1",
		"RAILS_FORCE_SSL=false"}, env...)
	cmd := exec.Command("bin/rails", "db:migrate")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bin/rails db:migrate: %v\n%s", err, out)
	}
	return dir, env
}

func startRails(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	port := freePort(t)
	s := launchIn(t, dir, env, port, append(append([]string{"-p", port, "-e", "production"}, args...), "config.ru")...)
	s.waitReady(t)
	return s
}

// Each shape of Rack body, and the statuses without one, answered as Puma
// answers them, in the same RACK_ENV, read off the wire: the same status,
// headers and body, and each framed as the table says (Content-Length or
// chunked, HEAD, Connection, HTTP/1.0).
func TestFrameworksFramingMatchesPuma(t *testing.T) {
	s := start(t, "-e", pumaEnv, app("framing.ru"))
	reference := strings.TrimPrefix(puma(t, "apps", "framing.ru", nil), "http://")
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	head := func(path string) string { return "HEAD " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	// A HEAD's answer has no body, and a Content-Length only if it is the
	// GET's: both servers send one where the body's length is known
	// before it is sent (an Array under Rack 3's Lint, which has to_ary).
	noBody := func(length int, rest string) string {
		return fmt.Sprintf("no body%s | no body (length %d)%s", rest, length, rest)
	}
	compareFraming(t, s.addr, reference, []framingCase{
		{get("/one"), "delimited, kept", ""},
		{head("/one"), noBody(9, ", kept"), ""},
		{get("/parts"), "delimited, kept", ""},
		{head("/parts"), noBody(26, ", kept"), ""},
		{get("/empty"), "delimited, kept", ""},
		{get("/sized"), "length 6, kept", ""},
		{head("/sized"), "no body (length 6), kept", ""},
		{get("/stream"), "delimited, kept", ""},
		{head("/stream"), noBody(24, ", kept"), ""},
		// Puma (5.6, 6.6 and 8) sends the app's Connection: close and
		// keeps the connection all the same.
		{get("/closed"), "delimited, closed (connection: close)", "-"},
		{head("/closed"), noBody(22, ", closed (connection: close)"), "-"},
		{get("/no-content"), "no body, kept", ""},
		// Puma 6.6 and 8 send a 304 Content-Length: 0, not the 200's.
		{get("/not-modified"), "no body, kept", "no body, kept | no body (length 0), kept"},
		{get("/redirect"), "delimited, kept", ""},
		{get("/nope"), "delimited, kept", ""},
		{head("/nope"), noBody(10, ", kept"), ""},
		{"GET /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "delimited, closed (connection: close)", ""},
		{"HEAD /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", noBody(9, ", closed (connection: close)"), ""},
		// HTTP/1.0 knows no chunks: the length when the whole body came
		// with the head, else the body up to the close.
		{"GET /one HTTP/1.0\r\n\r\n", "length 9, closed | to the close, closed", ""},
		{"GET /stream HTTP/1.0\r\n\r\n", "length 24, closed | to the close, closed", ""},
		{"HEAD /one HTTP/1.0\r\n\r\n", noBody(9, ", closed"), ""},
		// Kept alive at the client's word only with a length. Puma 5.6
		// keeps the connection, and sends a body whose end cannot be told.
		{"GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "length 9, kept (connection: keep-alive) | to the close, closed", "-"},
		{"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "delimited, kept", ""},
	})
}

// The Rails example answers under ruvoy as it does under Puma, answer for
// answer.
func TestFrameworksRailsMatchesPuma(t *testing.T) {
	ourDir, env := railsApp(t)
	theirDir, _ := railsApp(t)
	s := startRails(t, ourDir, env)
	reference := puma(t, theirDir, "config.ru", env)
	compareServers(t, s.url, reference, []step{
		{method: "GET", path: "/"},
		{method: "GET", path: "/articles/new"},
		{method: "POST", path: "/articles", token: true, form: url.Values{
			"article[title]": {"Hello"}, "article[body]": {"Written and read under two servers."}}},
		{method: "GET", path: "/articles/1"},
		{method: "GET", path: "/articles/1.json"},
		{method: "GET", path: "/articles/new"},
		{method: "POST", path: "/articles", token: true, form: url.Values{
			"article[title]": {""}, "article[body]": {"short"}}},
		{method: "GET", path: "/articles/999"},
		{method: "HEAD", path: "/articles"},
		{method: "GET", path: "/articles"},
	})
	// Assets: ruvoy's Caddy serves public/ itself (RAILS_SERVE_STATIC_FILES),
	// so its headers are the file server's; the bytes are the same.
	for _, path := range []string{"/styles.css", "/robots.txt"} {
		ours, theirs := s.get(t, path), getBody(t, reference+path)
		equal(t, path+" status", ours.status, 200)
		equal(t, path+" body", ours.body, theirs)
		equal(t, path+" type", strings.Split(ours.header.Get("Content-Type"), ";")[0],
			map[string]string{"/styles.css": "text/css", "/robots.txt": "text/plain"}[path])
	}
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// The Sinatra example answers under ruvoy as under Puma, in the same
// RACK_ENV (Sinatra's error pages and logging follow it).
func TestFrameworksSinatraMatchesPuma(t *testing.T) {
	s := start(t, "-e", pumaEnv, "../examples/sinatra/config.ru")
	reference := puma(t, "../examples/sinatra", "config.ru", nil)
	compareServers(t, s.url, reference, []step{
		{method: "GET", path: "/"},
		{method: "GET", path: "/"},
		{method: "GET", path: "/hello/ruby?greeting=hi"},
		{method: "POST", path: "/entries", form: url.Values{"text": {"signed under two servers"}}},
		{method: "GET", path: "/entries.json"},
		{method: "POST", path: "/entries", form: url.Values{"text": {""}}},
		{method: "GET", path: "/countdown"},
		{method: "GET", path: "/nope"},
		{method: "HEAD", path: "/"},
	})
}

// A bare Rack app under Rack::Lint (Rack 2.2 or 3.1, as installed)
// answers under ruvoy as under Puma: early hints left out over HTTP/1.1
// by both, a streamed body, HEAD, a 404.
func TestFrameworksRackLintMatchesPuma(t *testing.T) {
	s := start(t, "-e", pumaEnv, app("conventions.ru"))
	reference := puma(t, "apps", "conventions.ru", nil)
	compareServers(t, s.url, reference, []step{
		{method: "GET", path: "/hints"},
		{method: "GET", path: "/page"},
		{method: "HEAD", path: "/page"},
		{method: "GET", path: "/stream"},
		{method: "GET", path: "/whoami?q=1"},
		{method: "POST", path: "/whoami", form: url.Values{"a": {"1"}}},
		{method: "GET", path: "/nope"},
	})
}

// Each request in flight holds its own database connection (Rails 6.1
// keys them by thread; ruvoy by fiber), transactions commit, the pool is
// whole afterwards, and clients that leave mid-transaction leave no row.
func TestFrameworksRailsTransactionsPerFiber(t *testing.T) {
	db := startPostgres(t, "blog")
	dir, env := railsApp(t, "DATABASE_URL="+db, "RAILS_MAX_THREADS=60", "RUVOY_TEST_PROBES=1")
	s := startRails(t, dir, env)

	const n = 50
	var mu sync.Mutex
	connections := map[string]int{}
	var wg sync.WaitGroup
	began := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t := inGoroutine(t)
			r := s.do(t, "POST", fmt.Sprintf("/probes/transaction?sleep=0.1&tag=ok%d", i), nil)
			var v struct {
				Connection any `json:"connection"`
			}
			if r.status != 200 || json.Unmarshal([]byte(r.body), &v) != nil {
				t.Errorf("transaction %d: %d %s", i, r.status, r.body)
				return
			}
			mu.Lock()
			connections[fmt.Sprint(v.Connection)]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	t.Logf("%d transactions of 100 ms each in %v", n, time.Since(began))
	equal(t, "distinct connections for the requests in flight", len(connections), n)
	equal(t, "rows committed", s.get(t, "/probes/count?prefix=tx%20ok").body, fmt.Sprintf(`{"count":%d}`, n))
	// The pool's figures: a probe that fails, or lacks one, fails the test
	// (a nil map would read as an idle pool).
	pool := func() map[string]float64 {
		r := s.get(t, "/probes/pool")
		var p map[string]float64
		if err := json.Unmarshal([]byte(r.body), &p); r.status != 200 || err != nil {
			t.Fatalf("GET /probes/pool: %d %q (%v)", r.status, r.body, err)
		}
		for _, k := range []string{"busy", "waiting", "size"} {
			if _, ok := p[k]; !ok {
				t.Fatalf("GET /probes/pool: no %q in %v", k, p)
			}
		}
		return p
	}
	if p := pool(); p["busy"] != 0 || p["waiting"] != 0 {
		t.Fatalf("connections still checked out after the requests: %v", p)
	}

	// Clients that leave while their transaction is open.
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/probes/transaction?sleep=3&tag=left%d", s.url, i), nil)
			if res, err := client.Do(req); err == nil {
				res.Body.Close()
				t.Errorf("request %d should have been cut off", i)
			}
		}(i)
	}
	wg.Wait()
	eventually(t, 10*time.Second, "every connection back in the pool", func() bool {
		p := pool()
		return p["busy"] == 0 && p["waiting"] == 0
	})
	equal(t, "rows of abandoned transactions", s.get(t, "/probes/count?prefix=tx%20left").body, `{"count":0}`)
}

// send_file's body is a file (to_path): Go sends it.
func TestFrameworksRailsSendFile(t *testing.T) {
	dir, env := railsApp(t, "RUVOY_TEST_PROBES=1")
	s := startRails(t, dir, env)
	robots, _ := os.ReadFile(filepath.Join(dir, "public", "robots.txt"))
	r := s.get(t, "/probes/send_file")
	equal(t, "status", r.status, 200)
	equal(t, "body", r.body, string(robots))
	equal(t, "length", r.header.Get("Content-Length"), fmt.Sprint(len(robots)))
}

// --static: files that exist are the file server's (types, validators,
// precompressed variants); the rest goes to the app.
func TestFrameworksStaticFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "site.css"), []byte("body { color: red }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "site.css.gz"), []byte("gzip bytes"), 0o644)
	os.WriteFile(filepath.Join(dir, "site.css.br"), []byte("brotli bytes"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	s := start(t, "--static", dir, app("core.ru"))

	r := s.get(t, "/site.css")
	equal(t, "body", r.body, "body { color: red }\n")
	equal(t, "type", r.header.Get("Content-Type"), "text/css; charset=utf-8")
	if r.header.Get("Etag") == "" || r.header.Get("Last-Modified") == "" {
		t.Fatalf("no validators: %v", r.header)
	}
	r2 := s.do(t, "GET", "/site.css", nil, "If-None-Match", r.header.Get("Etag"))
	equal(t, "conditional GET", r2.status, 304)
	for enc, want := range map[string]string{"br": "brotli bytes", "gzip": "gzip bytes"} {
		req, _ := http.NewRequest("GET", s.url+"/site.css", nil)
		req.Header.Set("Accept-Encoding", enc)
		res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, enc+" variant", string(b), want)
		equal(t, enc+" encoding", res.Header.Get("Content-Encoding"), enc)
	}
	// Not files: the app answers.
	equal(t, "missing file", s.get(t, "/raw/hello").body, "hello world")
	equal(t, "a directory", s.get(t, "/sub/").status, 404)
	mustContain(t, "a directory goes to the app", s.get(t, "/sub/").body, "not found: /sub/")
}

// X-Sendfile (Rack::Sendfile, Rails' x_sendfile_header): Go sends the file
// when it lies in a --sendfile-dir, refuses when it does not.
func TestFrameworksXSendfile(t *testing.T) {
	dir := t.TempDir()
	inside := filepath.Join(dir, "report.txt")
	os.WriteFile(inside, []byte("the report, sent by Go\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	t.Setenv("SENDFILE_INSIDE", inside)
	t.Setenv("SENDFILE_OUTSIDE", outside)

	s := start(t, "--sendfile-dir", dir, app("sendfile.ru"))
	r := s.get(t, "/inside")
	equal(t, "status", r.status, 200)
	equal(t, "body", r.body, "the report, sent by Go\n")
	equal(t, "length", r.header.Get("Content-Length"), "23")
	equal(t, "the header is the server's business", r.header.Get("X-Sendfile"), "")
	r = s.get(t, "/outside")
	equal(t, "outside the directories", r.status, 500)
	if strings.Contains(r.body, "secret") {
		t.Fatal("a file outside the allowed directories was sent")
	}
	waitLog(t, s, "ruvoy: the app asked to send a file the server may not send (X-Sendfile)", "file", "secret.txt")

	// Another status keeps the file; a 206 gets the range its
	// Content-Range names ("the report, sent by Go\n" is 23 bytes), and
	// one the file does not have is refused.
	r = s.get(t, "/missing")
	equal(t, "404 from a file", r.status, 404)
	equal(t, "404 body", r.body, "the report, sent by Go\n")
	for _, c := range []struct{ rng, body string }{{"4-9/23", "report"}, {"0-2/*", "the"}, {"22-22/23", "\n"}} {
		r = s.get(t, "/range?"+c.rng)
		equal(t, "range "+c.rng, r.status, 206)
		equal(t, "range "+c.rng+" body", r.body, c.body)
		equal(t, "range "+c.rng+" length", r.header.Get("Content-Length"), strconv.Itoa(len(c.body)))
		equal(t, "range "+c.rng+" Content-Range", r.header.Get("Content-Range"), "bytes "+c.rng)
	}
	for _, bad := range []string{"4-23/23", "4-9/24", "9-4/23", "4-9", "x-9/23"} {
		r = s.get(t, "/range?"+bad)
		equal(t, "range "+bad, r.status, 500)
		if strings.Contains(r.body, "report") {
			t.Fatalf("range %s: the file was sent: %q", bad, r.body)
		}
	}
	waitLog(t, s, "ruvoy: the app sent a file (X-Sendfile) with a Content-Range it does not match: answered 500", "file", "report.txt")
	equal(t, "still serving", s.get(t, "/inside").body, "the report, sent by Go\n")

	// Without --sendfile-dir the header passes through, as the app wrote it.
	s = start(t, app("sendfile.ru"))
	r = s.get(t, "/inside")
	equal(t, "header passed through", r.header.Get("X-Sendfile"), inside)
	equal(t, "empty body", r.body, "")
}

// X-Forwarded-* reach the app only from trusted proxies.
func TestFrameworksTrustedProxies(t *testing.T) {
	forwarded := []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https"}
	s := start(t, app("core.ru"))
	env := envOf(t, s.do(t, "GET", "/env", nil, forwarded...).body)
	expectEnv(t, env, map[string]any{"REMOTE_ADDR": "127.0.0.1", "rack.url_scheme": "http",
		"HTTP_X_FORWARDED_FOR": nil, "HTTP_X_FORWARDED_PROTO": nil})

	s = start(t, "--trusted-proxies", "127.0.0.1/32", app("core.ru"))
	env = envOf(t, s.do(t, "GET", "/env", nil, forwarded...).body)
	expectEnv(t, env, map[string]any{"REMOTE_ADDR": "203.0.113.9", "rack.url_scheme": "https",
		"HTTP_X_FORWARDED_FOR": "203.0.113.9", "HTTP_X_FORWARDED_PROTO": "https"})
}

// `rackup -s ruvoy` and `rails server -u ruvoy` hand over to ruvoy, under
// Rack 2 (Rack::Handler) and rackup 2 (Rack 3's Rackup::Handler), with no
// deprecation warning.
func TestFrameworksRackHandler(t *testing.T) {
	lib, _ := filepath.Abs("../lib")
	handlerEnv := []string{"RUBYLIB=" + lib, "RUVOY_BIN=" + binary(t)}
	noWarning := func(what string, s *server) {
		t.Helper()
		if strings.Contains(strings.ToLower(s.stderr.String()), "deprecat") {
			t.Errorf("%s warned:\n%s", what, s.stderr)
		}
	}

	lookup := cmd(handlerEnv, "ruby", "-e", `begin
  require "rackup"
  handlers = Rackup::Handler
rescue LoadError
  require "rack/handler"
  handlers = Rack::Handler
end
print handlers.get("ruvoy").name`)
	var stderr strings.Builder
	lookup.Stderr = &stderr
	name, err := lookup.Output()
	if err != nil {
		t.Fatalf("Handler.get(\"ruvoy\"): %v\n%s", err, stderr.String())
	}
	if got := string(name); got != "Rack::Handler::Ruvoy" && got != "Rackup::Handler::Ruvoy" {
		t.Fatalf("Handler.get(\"ruvoy\") is %q", got)
	}
	equal(t, "Handler.get(\"ruvoy\") warnings", stderr.String(), "")

	port := freePort(t)
	s := &server{t: t, addr: "127.0.0.1:" + port, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	s.url = "http://" + s.addr
	s.cmd = exec.Command("rackup", "-s", "ruvoy", "-o", "127.0.0.1", "-p", port, "apps/core.ru")
	s.cmd.Env = append(os.Environ(), handlerEnv...)
	startCmd(t, s)
	equal(t, "rackup -s ruvoy", s.get(t, "/raw/hello").body, "hello world")
	s.waitStdout(t, "exec'd ruvoy", "serving "+mustAbs(t, "apps/core.ru"))
	noWarning("rackup -s ruvoy", s)

	dir, env := railsApp(t)
	s = railsServerRuvoy(t, dir, append(env, handlerEnv...))
	equal(t, "rails server -u ruvoy", s.get(t, "/articles").status, 200)
	s.waitStdout(t, "exec'd ruvoy", "ruvoy 0.1.0")
	noWarning("rails server -u ruvoy", s)

	// In development the app boots once (in ruvoy, not first in `rails
	// server` too) and its request log reaches the console, as under
	// Rails' own server.
	dir, env = railsApp(t, "RAILS_ENV=development")
	boots := filepath.Join(dir, "tmp", "boots.txt")
	os.WriteFile(filepath.Join(dir, "config", "initializers", "zz_boot_count.rb"),
		[]byte(`File.open(Rails.root.join("tmp", "boots.txt"), "a") { |f| f.puts Process.pid }`+"\n"), 0o644)
	os.Remove(boots)
	s = railsServerRuvoy(t, dir, append(env, handlerEnv...))
	equal(t, "rails server -u ruvoy, development", s.get(t, "/articles").status, 200)
	s.waitStdout(t, "the request log on the console", `Started GET "/articles"`)
	b, err := os.ReadFile(boots)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "boots", strings.Count(string(b), "\n"), 1)
}

// railsServerRuvoy runs `bin/rails server -u ruvoy` in dir.
func railsServerRuvoy(t *testing.T, dir string, env []string) *server {
	port := freePort(t)
	s := &server{t: t, addr: "127.0.0.1:" + port, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	s.url = "http://" + s.addr
	s.cmd = exec.Command("bin/rails", "server", "-u", "ruvoy", "-b", "127.0.0.1", "-p", port)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), env...)
	startCmd(t, s)
	return s
}

func mustAbs(t *testing.T, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// startCmd runs s.cmd and waits until it listens; stopped at the end.
func startCmd(t *testing.T, s *server) {
	t.Helper()
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		}
	})
	s.waitReady(t)
}
