package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/quic-go/quic-go/http3"
)

// getWith1xx GETs path and returns the 1xx answers before the response.
func getWith1xx(t *testing.T, c *http.Client, url string) (hints []textproto.MIMEHeader, res response) {
	t.Helper()
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			hints = append(hints, h)
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return hints, response{r.StatusCode, r.Header, string(b)}
}

// env["rack.early_hints"] sends a 103 with the app's Link lines before the
// response, over HTTP/2 and HTTP/3, and over HTTP/1.1 with
// --early-hints-http1; the
// hints are not the response's headers; none goes to an HTTP/1.0 client
// or once the response began. Where none would go the app has no
// env["rack.early_hints"], as under Puma.
func TestConventionsEarlyHints(t *testing.T) {
	s := start(t, "--h2c", app("conventions.ru"))
	hints, res := getWith1xx(t, client, s.url+"/hints")
	equal(t, "HTTP/1.1 hints by default", len(hints), 0)
	equal(t, "HTTP/1.1 body by default", res.body, "not hinted\n")
	hints, res = getWith1xx(t, h2cClient(), s.url+"/hints")
	equal(t, "HTTP/2 hints by default", len(hints), 1)
	equal(t, "HTTP/2 body by default", res.body, "hinted\n")

	// HTTP/3, on the TLS port.
	c := makeCerts(t)
	secure := start(t, "--tls-cert", c.serverCert, "--tls-key", c.serverKey, app("conventions.ru"))
	h3 := &http.Client{Timeout: 30 * time.Second, Transport: &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool}}}
	hints, res = getWith1xx(t, h3, "https://"+secure.addr+"/hints")
	equal(t, "HTTP/3 hints", len(hints), 1)
	equal(t, "HTTP/3 Link lines", strings.Join(hints[0]["Link"], " | "),
		"</style.css>; rel=preload; as=style | </app.js>; rel=preload; as=script")
	equal(t, "HTTP/3 status", res.status, 200)
	equal(t, "HTTP/3 body", res.body, "hinted\n")
	equal(t, "HTTP/3 final Link", strings.Join(res.header["Link"], " | "), "</final>")
	hints, res = getWith1xx(t, h3, "https://"+secure.addr+"/hints/late")
	equal(t, "HTTP/3 late hints", len(hints), 0)
	equal(t, "HTTP/3 late body", res.body, "ab")

	s = start(t, "--h2c", "--early-hints-http1", app("conventions.ru"))
	for name, c := range map[string]*http.Client{"HTTP/1.1": client, "HTTP/2": h2cClient()} {
		hints, res := getWith1xx(t, c, s.url+"/hints")
		equal(t, name+" hints", len(hints), 1)
		equal(t, name+" Link lines", strings.Join(hints[0]["Link"], " | "),
			"</style.css>; rel=preload; as=style | </app.js>; rel=preload; as=script")
		equal(t, name+" status", res.status, 200)
		equal(t, name+" body", res.body, "hinted\n")
		equal(t, name+" final Link", strings.Join(res.header["Link"], " | "), "</final>")

		hints, res = getWith1xx(t, c, s.url+"/hints/late")
		equal(t, name+" late hints", len(hints), 0)
		equal(t, name+" late body", res.body, "ab")
	}

	raw := s.raw(t, "GET /hints HTTP/1.0\r\nHost: x\r\n\r\n")
	if !strings.HasPrefix(raw, "HTTP/1.0 200 OK\r\n") || strings.Contains(raw, "103") || strings.Contains(raw, "style.css") ||
		!strings.HasSuffix(raw, "not hinted\n") {
		t.Fatalf("an HTTP/1.0 client got:\n%s", raw)
	}

	// A header name that is not a token is the app's error: 500, logged.
	hints, res = getWith1xx(t, client, s.url+"/hints/bad")
	equal(t, "bad hints", len(hints), 0)
	equal(t, "bad hints status", res.status, 500)
	eventually(t, 10*time.Second, "the app's error logged", func() bool { return strings.Contains(s.stderr.String(), "is not a token") })
	equal(t, "after a bad hint", s.get(t, "/hints").body, "hinted\n")
}

// In development an exception shows its class, message and backtrace, as
// under rackup and Puma; in any other environment a bare 500.
func TestConventionsDevelopmentErrors(t *testing.T) {
	dev := start(t, "-e", "development", app("conventions.ru"))
	res := dev.do(t, "GET", "/raise", nil, "Accept", "text/plain")
	equal(t, "development status", res.status, 500)
	mustContain(t, "development body", res.body, "ArgumentError: conventions: the app failed here")
	mustContain(t, "development backtrace", res.body, "conventions.ru:")
	res = dev.do(t, "GET", "/raise", nil, "Accept", "text/html")
	mustContain(t, "development page", res.body, "<html")
	equal(t, "development, no error", dev.get(t, "/hints").body, "not hinted\n")

	prod := start(t, "-e", "production", app("conventions.ru"))
	res = prod.get(t, "/raise")
	equal(t, "production status", res.status, 500)
	equal(t, "production body", res.body, "Internal Server Error\n")
}

// `ruvoy help` is ruvoy's usage (Caddy's subcommands still get theirs) and
// `ruvoy version` ruvoy's versions, not "no rackup file at ./help".
func TestConventionsHelpAndVersion(t *testing.T) {
	out, err := exec.Command(binary(t), "help").CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy help: %v\n%s", err, out)
	}
	mustContain(t, "ruvoy help", string(out), "Usage: ruvoy [options] [config.ru]")
	out, err = exec.Command(binary(t), "help", "run").CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy help run: %v\n%s", err, out)
	}
	mustContain(t, "ruvoy help run", string(out), "--config")
	out, err = exec.Command(binary(t), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ruvoy ") {
		t.Fatalf("ruvoy version: %v\n%s", err, out)
	}
	mustContain(t, "ruvoy version", string(out), "caddy v")
}

// Under a Caddyfile, handle_path mounts the app at SCRIPT_NAME (so that it
// builds its URLs with the prefix) and basic_auth's user is REMOTE_USER; a
// client cannot claim one with a header.
func TestConventionsMountAndRemoteUser(t *testing.T) {
	hash, err := exec.Command(binary(t), "hash-password", "--plaintext", "secret").Output()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	rackup, _ := filepath.Abs(app("conventions.ru"))
	s, _ := runCaddyfile(t, port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}
http://:%s {
	bind 127.0.0.1
	basic_auth /private/* {
		alice %s
	}
	handle_path /mounted/* {
		ruvoy * %s
	}
	handle_path /private/* {
		ruvoy * %s
	}
	handle {
		ruvoy * %s
	}
}
`, port, strings.TrimSpace(string(hash)), rackup, rackup, rackup))

	base := "http://" + s.addr
	equal(t, "at the root", s.get(t, "/whoami").body,
		"SCRIPT_NAME= PATH_INFO=/whoami REMOTE_USER=(none) url="+base+"/whoami\n")
	equal(t, "mounted", s.get(t, "/mounted/whoami").body,
		"SCRIPT_NAME=/mounted PATH_INFO=/whoami REMOTE_USER=(none) url="+base+"/mounted/whoami\n")
	equal(t, "a claimed user", s.do(t, "GET", "/whoami", nil, "Remote-User", "mallory").body,
		"SCRIPT_NAME= PATH_INFO=/whoami REMOTE_USER=(none) url="+base+"/whoami\n")
	equal(t, "no credentials", s.get(t, "/private/whoami").status, 401)

	req, _ := http.NewRequest("GET", base+"/private/whoami", nil)
	req.SetBasicAuth("alice", "secret")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "authenticated", string(body),
		"SCRIPT_NAME=/private PATH_INFO=/whoami REMOTE_USER=alice url="+base+"/private/whoami\n")
}

// -p 0 names the port the kernel picked; --pidfile holds the process id
// while it serves and goes with it.
func TestConventionsPortZeroAndPidfile(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "ruvoy.pid")
	s := launch(t, "0", "-p", "0", "--pidfile", pidfile, app("conventions.ru"))
	var addr string
	eventually(t, 60*time.Second, "the banner", func() bool {
		m := regexp.MustCompile(`serving \S+ on http://(127\.0\.0\.1:(\d+))"`).FindStringSubmatch(s.stdout.String())
		if m == nil || m[2] == "0" {
			return false
		}
		addr = m[1]
		return true
	})
	res, err := client.Get("http://" + addr + "/whoami")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	equal(t, "status on the port named", res.StatusCode, 200)
	pid, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "pidfile", strings.TrimSpace(string(pid)), strconv.Itoa(s.cmd.Process.Pid))
	s.cmd.Process.Signal(syscall.SIGTERM)
	equal(t, "exit", s.wait(t, 30*time.Second), 0)
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("the pidfile outlived the process: %v", err)
	}
}

// -a unix:///PATH serves on a unix socket a proxy's group may reach; -a
// fd/3 on a socket handed over, as systemd's socket activation does.
func TestConventionsUnixSocketAndFd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "app.sock")
	s := launch(t, "0", "-a", "unix://"+sock, app("conventions.ru"))
	unixClient := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var res *http.Response
	eventually(t, 60*time.Second, "the socket answers", func() bool {
		var err error
		res, err = unixClient.Get("http://app/whoami")
		return err == nil
	})
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	mustContain(t, "over the socket", string(body), "PATH_INFO=/whoami")
	mustContain(t, "banner", s.stdout.String(), "on unix://"+sock+`"`)
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "socket mode", fi.Mode().Perm(), os.FileMode(0o660))
	// A large upload over the socket goes through the same guard.
	big := strings.Repeat("x", 1<<20)
	res, err = unixClient.Post("http://app/whoami", "text/plain", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	equal(t, "upload over the socket", res.StatusCode, 200)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	fd := &server{t: t, addr: addr, url: "http://" + addr, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	fd.cmd = exec.Command(binary(t), "-a", "fd/3", app("conventions.ru"))
	fd.cmd.ExtraFiles = []*os.File{f}
	fd.cmd.Stdout, fd.cmd.Stderr = fd.stdout, fd.stderr
	fd.cmd.Env = append(os.Environ(), "RACK_ENV=test")
	if err := fd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	go func() { fd.err = fd.cmd.Wait(); close(fd.done) }()
	t.Cleanup(func() { fd.stop() })
	fd.waitReady(t)
	mustContain(t, "over the handed-over socket", fd.get(t, "/whoami").body, "PATH_INFO=/whoami")
	fd.waitStdout(t, "the banner names the socket's address", `"listen":["http://`+addr+` (fd/3)"]`)

	out, _ := exec.Command(binary(t), "-a", "unix:///tmp/x.sock", "-p", "80", app("conventions.ru")).CombinedOutput()
	mustContain(t, "unix socket with a port", string(out), "exclude each other")
}

// `ruvoy reload` after an edit of the app's code, with the config file
// unchanged, builds the app again (Caddy alone would say "config is
// unchanged" and do nothing).
func TestConventionsReloadAfterCodeChange(t *testing.T) {
	dir := t.TempDir()
	rackup := filepath.Join(dir, "config.ru")
	write := func(v string) {
		os.WriteFile(rackup, []byte(`run lambda { |env| [200, { "content-type" => "text/plain" }, ["`+v+`\n"]] }`+"\n"), 0o644)
	}
	write("v1")
	port, adminPort := freePort(t), freePort(t)
	s, caddyfile := runCaddyfile(t, port, fmt.Sprintf(`{
	admin 127.0.0.1:%s
	auto_https off
	persist_config off
}
http://:%s {
	bind 127.0.0.1
	ruvoy * %s
}
`, adminPort, port, rackup))
	equal(t, "before", s.get(t, "/").body, "v1\n")
	write("v2")
	out, err := exec.Command(binary(t), "reload", "--config", caddyfile, "--adapter", "caddyfile",
		"--address", "127.0.0.1:"+adminPort).CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy reload: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the new code", func() bool { return s.get(t, "/").body == "v2\n" })
}

// The access log shows query parameters named like secrets as [FILTERED]
// (Rails' default names, or --filter-parameters), and the rest as sent.
func TestConventionsAccessLogFilters(t *testing.T) {
	s := start(t, "--access-log", app("conventions.ru"))
	s.get(t, "/whoami?user=bob&password=hunter2&api_key=k1&q=a%20b")
	eventually(t, 5*time.Second, "the filtered line", func() bool {
		return strings.Contains(s.stdout.String(), `"uri":"/whoami?user=bob&password=[FILTERED]&api_key=[FILTERED]&q=a%20b"`)
	})
	if strings.Contains(s.stdout.String(), "hunter2") || strings.Contains(s.stdout.String(), "k1") {
		t.Fatalf("a secret reached the log:\n%s", s.stdout)
	}

	custom := start(t, "--access-log", "--filter-parameters", "user", app("conventions.ru"))
	custom.get(t, "/whoami?user=bob&password=hunter2")
	eventually(t, 5*time.Second, "the custom-filtered line", func() bool {
		return strings.Contains(custom.stdout.String(), `"uri":"/whoami?user=[FILTERED]&password=hunter2"`)
	})
}

// With the admin API on, /metrics has Caddy's request counts and
// latencies by status beside ruvoy's own, in CLI mode too.
func TestConventionsRequestMetrics(t *testing.T) {
	adminPort := freePort(t)
	s := start(t, "--admin-port", adminPort, app("conventions.ru"))
	s.get(t, "/whoami")
	s.get(t, "/nope")
	s.get(t, "/whoami")
	res, err := client.Get("http://127.0.0.1:" + adminPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	mustContain(t, "metrics", string(b), `caddy_http_request_duration_seconds_count{code="200",handler="ruvoy",method="GET",server="ruvoy"} 2`)
	mustContain(t, "metrics", string(b), `caddy_http_request_duration_seconds_count{code="404",handler="ruvoy",method="GET",server="ruvoy"} 1`)
	mustContain(t, "metrics", string(b), "ruvoy_requests_admitted_total")
}

// Every request reaches the app with an X-Request-Id, the one it came with
// (cleaned as Rails cleans it) or a new one, and the access log records
// it; ruvoy adds none to the response.
func TestConventionsRequestID(t *testing.T) {
	s := start(t, "--access-log", app("conventions.ru"))
	res := s.get(t, "/request-id")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(res.body) {
		t.Fatalf("a made id: %q", res.body)
	}
	equal(t, "response header", res.header.Get("X-Request-Id"), "")
	made := res.body
	eventually(t, 5*time.Second, "the made id in the access log", func() bool {
		return strings.Contains(s.stdout.String(), `"request_id":"`+made+`"`)
	})
	equal(t, "a given id", s.do(t, "GET", "/request-id", nil, "X-Request-Id", "lb-42").body, "lb-42")
	equal(t, "a dirty id", s.do(t, "GET", "/request-id", nil, "X-Request-Id", "lb 42<script>").body, "lb42script")
	if s.get(t, "/request-id").body == made {
		t.Fatal("two requests got one id")
	}
}

// --compress compresses text for clients that accept it (zstd or gzip),
// leaves small answers and other clients alone, and keeps a stream
// streaming: each chunk arrives when the app yields it.
func TestConventionsCompress(t *testing.T) {
	plain := start(t, app("conventions.ru"))
	s := start(t, "--compress", app("conventions.ru"))
	page := plain.get(t, "/page").body
	if len(page) < 10000 {
		t.Fatalf("the page is %d bytes", len(page))
	}
	for _, enc := range []string{"gzip", "zstd"} {
		req, _ := http.NewRequest("GET", s.url+"/page", nil)
		req.Header.Set("Accept-Encoding", enc)
		res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		equal(t, enc+" encoding", res.Header.Get("Content-Encoding"), enc)
		if len(raw) > len(page)/4 {
			t.Fatalf("%s: %d bytes for a page of %d", enc, len(raw), len(page))
		}
		var r io.Reader
		if enc == "gzip" {
			r, err = gzip.NewReader(bytes.NewReader(raw))
		} else {
			r, err = zstd.NewReader(bytes.NewReader(raw))
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		equal(t, enc+" body", string(body), page)
	}
	res := s.do(t, "GET", "/page", nil, "Accept-Encoding", "identity")
	equal(t, "identity", res.header.Get("Content-Encoding"), "")
	equal(t, "identity body", res.body, page)
	small := s.do(t, "GET", "/whoami", nil, "Accept-Encoding", "gzip")
	equal(t, "small answer", small.header.Get("Content-Encoding"), "")

	// The stream, gzipped: each of its three lines (0.3 s apart in the
	// app) is decoded from what has arrived before the next is yielded.
	stream := plain.get(t, "/stream").body
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "the stream's encoding", r.Header.Get("Content-Encoding"), "gzip")
	equal(t, "the stream's framing", fmt.Sprint(r.TransferEncoding), "[chunked]")
	gz, err := gzip.NewReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(gz)
	var got strings.Builder
	var arrivals []time.Time
	for {
		line, err := lines.ReadString('\n')
		got.WriteString(line)
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the gzipped stream after %d bytes: %v", got.Len(), err)
		}
		arrivals = append(arrivals, time.Now())
	}
	equal(t, "the gzipped stream, decoded", got.String(), stream)
	if len(arrivals) != 3 || arrivals[2].Sub(arrivals[0]) < 400*time.Millisecond {
		t.Fatalf("the stream's 3 lines were decoded at %v: not as they were yielded, 0.3 s apart", arrivals)
	}
}
