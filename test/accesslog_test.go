package test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The access log as a Rails user reads it: --access-log-format common
// writes Rack::CommonLogger's line; json, Caddy's entries as JSON lines.

// commonLine is a request line of the common log format as
// Rack::CommonLogger writes it (the path and query given).
func commonLine(pathAndQuery, size string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET ` +
		regexp.QuoteMeta(pathAndQuery) + ` HTTP/1\.1" 200 ` + size + ` \d+\.\d{4}$`)
}

func TestCoreAccessLogFormats(t *testing.T) {
	s := start(t, "--access-log-format", "common", app("core.ru"))
	equal(t, "a request", s.get(t, "/raw/hello?x=1&password=hunter2").body, "hello world")
	line := commonLine("/raw/hello?x=1&password=[FILTERED]", "11")
	eventually(t, 5*time.Second, "the common log line", func() bool { return line.MatchString(s.stdout.String()) })
	if strings.Contains(s.stdout.String(), "hunter2") {
		t.Fatalf("a secret reached the log:\n%s", s.stdout)
	}
	for _, l := range strings.Split(strings.TrimSpace(s.stdout.String()), "\n") {
		if strings.Contains(l, "http.log.access") {
			t.Fatalf("a JSON entry beside the common line: %s", l)
		}
	}

	j := start(t, "--access-log-format", "json", "-w", "2", app("core.ru"))
	j.get(t, "/raw/hello")
	eventually(t, 5*time.Second, "the JSON entry", func() bool {
		return strings.Contains(j.stdout.String(), `"logger":"http.log.access`) && strings.Contains(j.stdout.String(), `"uri":"/raw/hello"`)
	})

	bad := launch(t, freePort(t), "--access-log-format", "apache", app("core.ru"))
	equal(t, "exit status", bad.wait(t, 30*time.Second), 2)
	mustContain(t, "the refusal", bad.stderr.String(), `ruvoy: --access-log-format: want json or common, got "apache"`)
}

// rackup adds Rack::CommonLogger in development (unless -q): under Puma,
// a line a request on stderr. Under `rackup -s ruvoy` the same line, as
// ruvoy writes its access log (stdout).
func TestFrameworksRackHandlerRequestLine(t *testing.T) {
	lib := mustAbs(t, "../lib")
	handlerEnv := []string{"RUBYLIB=" + lib, "RUVOY_BIN=" + binary(t), "RACK_ENV="}
	rackup := func(t *testing.T, handler string, args ...string) *server {
		port := freePort(t)
		s := &server{t: t, addr: "127.0.0.1:" + port, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
		s.url = "http://" + s.addr
		s.cmd = exec.Command("rackup", append([]string{"-s", handler, "-E", "development", "-o", "127.0.0.1", "-p", port}, append(args, "apps/core.ru")...)...)
		s.cmd.Env = append(os.Environ(), handlerEnv...)
		startCmd(t, s)
		return s
	}
	line := commonLine("/raw/hello?x=1", "11")

	// Rack::CommonLogger writes the Content-Length the app's answer had
	// (Rack 3.1's rackup adds none here: "-"); ruvoy, the bytes it sent.
	puma := rackup(t, "puma")
	equal(t, "under Puma", puma.get(t, "/raw/hello?x=1").body, "hello world")
	eventually(t, 10*time.Second, "Puma's request line", func() bool {
		return commonLine("/raw/hello?x=1", "(?:11|-)").MatchString(puma.stderr.String())
	})

	ours := rackup(t, "ruvoy")
	equal(t, "under ruvoy", ours.get(t, "/raw/hello?x=1").body, "hello world")
	eventually(t, 10*time.Second, "ruvoy's request line", func() bool { return line.MatchString(ours.stdout.String()) })

	quiet := rackup(t, "ruvoy", "-q")
	equal(t, "quiet", quiet.get(t, "/raw/hello?x=1").body, "hello world")
	quiet.waitStdout(t, "the banner", ": serving ")
	time.Sleep(500 * time.Millisecond)
	if line.MatchString(quiet.stdout.String()) || line.MatchString(quiet.stderr.String()) {
		t.Fatalf("rackup -q logged the request:\n%s\n%s", quiet.stdout, quiet.stderr)
	}
}
