package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	ruvoycaddy "github.com/ruvoy/ruvoy/caddy"
	"github.com/ruvoy/ruvoy/internal/settings"
)

func ptr[T any](v T) *T { return &v }

// env is a fake getenv for parseOptions.
func env(vars ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	return func(k string) string { return m[k] }
}

func abs(t *testing.T, path string) string {
	t.Helper()
	a, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// defaultOptions is what parseOptions gives for no arguments and an empty
// environment.
func defaultOptions(t *testing.T) options {
	return options{port: "8080", address: "127.0.0.1", handler: ruvoycaddy.Handler{Environment: "development"},
		grace: 10 * time.Second, minUploadRate: 1024, writeTimeout: 30 * time.Second,
		filterParameters: []string{"passw", "secret", "token", "_key", "crypt", "salt", "certificate", "otp", "ssn"},
		rackupArg:        "config.ru", rackup: abs(t, "config.ru")}
}

func TestParseOptions(t *testing.T) {
	dir := t.TempDir()
	dir2 := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("from-a-file\nignored\n"), 0o600)
	cases := []struct {
		name   string
		args   []string
		getenv func(string) string
		want   func(o *options)
	}{
		{"defaults", nil, env(), func(o *options) {}},
		{"-p 80", []string{"-p", "80"}, env(), func(o *options) { o.port, o.portGiven = "80", true }},
		{"-p80", []string{"-p80"}, env(), func(o *options) { o.port, o.portGiven = "80", true }},
		{"--port 80", []string{"--port", "80"}, env(), func(o *options) { o.port, o.portGiven = "80", true }},
		{"--port=80", []string{"--port=80"}, env(), func(o *options) { o.port, o.portGiven = "80", true }},
		{"last -p wins", []string{"-p", "81", "--port=82"}, env(), func(o *options) { o.port, o.portGiven = "82", true }},
		{"PORT", nil, env("PORT", "9000"), func(o *options) { o.port = "9000" }},
		{"-p over PORT", []string{"-p", "9001"}, env("PORT", "9000"), func(o *options) { o.port, o.portGiven = "9001", true }},
		{"-a", []string{"-a", "0.0.0.0"}, env(), func(o *options) { o.address, o.addressGiven = "0.0.0.0", true }},
		{"--address=", []string{"--address=::1"}, env(), func(o *options) { o.address, o.addressGiven = "::1", true }},
		{"unix socket", []string{"-a", "unix:///tmp/r.sock"}, env(), func(o *options) {
			o.address, o.addressGiven, o.socket = "unix:///tmp/r.sock", true, "unix//tmp/r.sock|0660"
		}},
		{"RACK_ENV", nil, env("RACK_ENV", "production"), func(o *options) { o.handler.Environment = "production" }},
		{"--health-path: a drain delay of 5 s", []string{"--health-path", "/up"}, env(), func(o *options) { o.healthPath, o.drainDelay = "/up", 5*time.Second }},
		{"--health-path, --drain-delay 0", []string{"--health-path=/up", "--drain-delay", "0"}, env(), func(o *options) { o.healthPath = "/up" }},
		{"--drain-delay alone", []string{"--drain-delay", "2.5"}, env(), func(o *options) { o.drainDelay = 2500 * time.Millisecond }},
		{"-e over RACK_ENV", []string{"-eproduction"}, env("RACK_ENV", "test"), func(o *options) { o.handler.Environment = "production" }},
		{"--environment", []string{"--environment", "staging"}, env(), func(o *options) { o.handler.Environment = "staging" }},
		{"--pidfile", []string{"--pidfile", "x.pid"}, env(), func(o *options) { o.pidfile = abs(t, "x.pid") }},
		{"--pid alias", []string{"--pid", "x.pid"}, env(), func(o *options) { o.pidfile = abs(t, "x.pid") }},
		{"--pid= alias", []string{"--pid=y.pid"}, env(), func(o *options) { o.pidfile = abs(t, "y.pid") }},
		{"rackup", []string{"app.ru"}, env(), func(o *options) {
			o.rackupArg, o.rackup, o.rest = "app.ru", abs(t, "app.ru"), []string{"app.ru"}
		}},
		{"options after the rackup", []string{"app.ru", "-p", "9000"}, env(), func(o *options) {
			o.rackupArg, o.rackup, o.rest = "app.ru", abs(t, "app.ru"), []string{"app.ru"}
			o.port, o.portGiven = "9000", true
		}},
		{"-- ends options", []string{"-p", "81", "--", "-x.ru"}, env(), func(o *options) {
			o.port, o.portGiven = "81", true
			o.rackupArg, o.rackup, o.rest = "-x.ru", abs(t, "-x.ru"), []string{"-x.ru"}
		}},
		{"- is positional", []string{"-"}, env(), func(o *options) {
			o.rackupArg, o.rackup, o.rest = "-", abs(t, "-"), []string{"-"}
		}},
		{"-- alone", []string{"--"}, env(), func(o *options) {}},
		{"WEB_CONCURRENCY", nil, env("WEB_CONCURRENCY", "3"), func(o *options) { o.handler.Workers = 3 }},
		{"-w 0 over WEB_CONCURRENCY", []string{"-w", "0"}, env("WEB_CONCURRENCY", "3"), func(o *options) { o.handler.Workers = 0 }},
		{"-w2 over WEB_CONCURRENCY", []string{"-w2"}, env("WEB_CONCURRENCY", "3"), func(o *options) { o.handler.Workers = 2 }},
		{"--workers=auto", []string{"--workers=auto"}, env(), func(o *options) { o.handler.Workers = runtime.NumCPU() }},
		{"WEB_CONCURRENCY=auto", nil, env("WEB_CONCURRENCY", "auto"), func(o *options) { o.handler.Workers = runtime.NumCPU() }},
		{"numbers", []string{"--grace", "3", "--max-body-bytes=100", "--max-requests", "5", "--queue-timeout", "0",
			"--max-inflight-body-bytes", "1000", "--hold-warn", "0", "--min-upload-rate=0", "--worker-max-rss", "512",
			"--request-timeout", "1.5", "--vm-hold-limit", "30", "--admin-port", "2019",
			"--max-requests-per-connection", "8", "--max-requests-per-client", "9", "--write-timeout", "0", "--worker-timeout", "2.5"}, env(), func(o *options) {
			o.grace, o.minUploadRate, o.adminPort, o.writeTimeout = 3*time.Second, 0, "2019", 0
			zero, sec := caddy.Duration(0), caddy.Duration(time.Second)
			h := &o.handler
			h.MaxBodyBytes, h.MaxRequests, h.QueueTimeout, h.MaxInflightBodyBytes, h.HoldWarn = 100, 5, 0, 1000, &zero
			h.WorkerMaxRSSBytes, h.RequestTimeout, h.VMHoldLimit = 512<<20, sec*3/2, ptr(30*sec)
			h.MaxRequestsPerConn, h.MaxRequestsPerClient, h.WorkerTimeout = 8, 9, sec*5/2
		}},
		{"the admin token from the environment", []string{"--admin-port", "2019"}, env("RUVOY_ADMIN_TOKEN", " t0k3n \n"), func(o *options) {
			o.adminPort, o.adminToken = "2019", "t0k3n"
		}},
		{"the admin token from a file, over the environment", []string{"--admin-port", "2019", "--admin-token-file", tokenFile},
			env("RUVOY_ADMIN_TOKEN", "other"), func(o *options) {
				o.adminPort, o.adminToken, o.adminTokenFile = "2019", "from-a-file", tokenFile
			}},
		{"no admin port, no token", nil, env("RUVOY_ADMIN_TOKEN", "t"), func(o *options) {}},
		{"--admin-socket", []string{"--admin-socket", "admin.sock"}, env(), func(o *options) { o.adminSocket = abs(t, "admin.sock") }},
		{"switches", []string{"--h2c", "--context", "--access-log", "--compress", "--reuse-port", "--print-config", "-v"}, env(),
			func(o *options) {
				o.h2c, o.accessLog, o.compress, o.reusePort, o.printConfig, o.version = true, true, true, true, true, true
				o.handler.Context = &ruvoycaddy.ContextConfig{}
			}},
		{"--version", []string{"--version"}, env(), func(o *options) { o.version = true }},
		{"--tls-internal", []string{"--tls-internal"}, env(), func(o *options) { o.tlsInternal = true }},
		{"--domain", []string{"--domain", "example.com"}, env(), func(o *options) {
			o.domain, o.port, o.address = "example.com", "443", "0.0.0.0"
		}},
		{"--domain with -p", []string{"--domain", "example.com", "-p", "8443"}, env(), func(o *options) {
			o.domain, o.port, o.portGiven, o.address = "example.com", "8443", true, "0.0.0.0"
		}},
		{"--upstream repeats", []string{"--upstream", "a=http://x", "--upstream=b=https://y:8443,https://z"}, env(), func(o *options) {
			o.upstreams = []settings.Upstream{{Name: "a", Hosts: []string{"x:80"}}, {Name: "b", Hosts: []string{"y:8443", "z:443"}, TLS: true}}
		}},
		{"--cluster, --upstream's old name", []string{"--cluster", "a=http://x"}, env(), func(o *options) {
			o.upstreams = []settings.Upstream{{Name: "a", Hosts: []string{"x:80"}}}
			o.warnings = []string{"--cluster is deprecated: it is now --upstream (same value)"}
		}},
		{"--sendfile-dir repeats", []string{"--sendfile-dir", dir, "--sendfile-dir=" + dir2}, env(), func(o *options) {
			o.handler.SendfileDirs = []string{dir, dir2}
		}},
		{"--static", []string{"--static", dir}, env(), func(o *options) { o.static = dir }},
		{"--trusted-proxies repeats", []string{"--trusted-proxies", "10.0.0.0/8,127.0.0.1", "--trusted-proxies=::1"}, env(),
			func(o *options) { o.trustedProxies = []string{"10.0.0.0/8", "127.0.0.1", "::1"} }},
		{"--filter-parameters", []string{"--filter-parameters", "a,b"}, env(), func(o *options) { o.filterParameters = []string{"a", "b"} }},
		{"--filter-parameters last wins", []string{"--filter-parameters", "a", "--filter-parameters", "b"}, env(),
			func(o *options) { o.filterParameters = []string{"b"} }},
		{"--filter-parameters ''", []string{"--filter-parameters", ""}, env(), func(o *options) { o.filterParameters = []string{""} }},
		{"--access-log-format common", []string{"--access-log-format", "common"}, env(), func(o *options) {
			o.accessLog, o.accessLogFormat = true, "common"
		}},
		{"--access-log-format=json", []string{"--access-log", "--access-log-format=json"}, env(), func(o *options) {
			o.accessLog, o.accessLogFormat = true, "json"
		}},
		{"-a [::1]", []string{"-a", "[::1]"}, env(), func(o *options) { o.address, o.addressGiven = "::1", true }},
	}
	for _, c := range cases {
		got, err := parseOptions(c.args, c.getenv)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := defaultOptions(t)
		c.want(&want)
		if len(got.rest) == 0 {
			got.rest = nil // no ARGV, however it is spelled
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", c.name, *got, want)
		}
	}
}

func TestParseOptionsRailsServeStaticFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "public"), 0o755); err != nil {
		t.Fatal(err)
	}
	rackup := filepath.Join(dir, "config.ru")
	o, err := parseOptions([]string{rackup}, env("RAILS_SERVE_STATIC_FILES", "1"))
	if err != nil || o.static != filepath.Join(dir, "public") {
		t.Errorf("RAILS_SERVE_STATIC_FILES: static %q, %v", o.static, err)
	}
	o, err = parseOptions([]string{"--static", t.TempDir(), rackup}, env("RAILS_SERVE_STATIC_FILES", "1"))
	if err != nil || o.static == filepath.Join(dir, "public") {
		t.Errorf("--static over RAILS_SERVE_STATIC_FILES: static %q, %v", o.static, err)
	}
	o, err = parseOptions([]string{rackup}, env())
	if err != nil || o.static != "" {
		t.Errorf("no RAILS_SERVE_STATIC_FILES: static %q, %v", o.static, err)
	}
}

func TestParseOptionsErrors(t *testing.T) {
	cases := []struct {
		args   []string
		getenv func(string) string
		err    string
	}{
		{[]string{"-p"}, env(), "option -p needs a value"},
		{[]string{"--port"}, env(), "option --port needs a value"},
		{[]string{"app.ru", "--grace"}, env(), "option --grace needs a value"},
		{[]string{"--pid"}, env(), "option --pid needs a value"},
		{[]string{"-w"}, env(), "option -w needs a value"},
		{[]string{"--no-such-option"}, env(), "unknown option --no-such-option"},
		{[]string{"--health-path", "up"}, env(), `--health-path: want a path such as /up, got "up"`},
		{[]string{"--health-path", "/up*"}, env(), `--health-path: want a path such as /up, got "/up*"`},
		{[]string{"--drain-delay", "-1"}, env(), `--drain-delay: want a number of seconds, got "-1"`},
		{[]string{"--preload"}, env(), "--preload forks workers: give --workers N (or WEB_CONCURRENCY) too"},
		{[]string{"--preload", "-w", "0"}, env("WEB_CONCURRENCY", "2"), "--preload forks workers: give --workers N (or WEB_CONCURRENCY) too"},
		{[]string{"--no-such-option=1"}, env(), "unknown option --no-such-option"},
		{[]string{"-x"}, env(), "unknown option -x"},
		{[]string{"-xyz"}, env(), "unknown option -x"},
		{[]string{"---x"}, env(), "unknown option ---x"},
		{[]string{"--=x"}, env(), "unknown option --"},
		{[]string{"--bogus", "-h"}, env(), "unknown option --bogus"},
		{[]string{"a.ru", "b.ru"}, env(), "one rackup file at most, got a.ru b.ru"},
		{[]string{"a.ru", "--", "b.ru"}, env(), "one rackup file at most, got a.ru b.ru"},
		{[]string{"-w", "many"}, env(), `-w: want a number of workers from 0 to 256, or auto, got "many"`},
		{[]string{"-w", "257"}, env("WEB_CONCURRENCY", "3"), `-w: want a number of workers from 0 to 256, or auto, got "257"`},
		{nil, env("WEB_CONCURRENCY", "x"), `WEB_CONCURRENCY: want a number of workers from 0 to 256, or auto, got "x"`},
		{[]string{"-w", "2"}, env("WEB_CONCURRENCY", "x"), `WEB_CONCURRENCY: want a number of workers from 0 to 256, or auto, got "x"`},
		{[]string{"--grace", "x"}, env(), `--grace: want a number of seconds, got "x"`},
		{[]string{"--grace=-1"}, env(), `--grace: want a number of seconds, got "-1"`},
		{[]string{"--grace", "x", "--bogus"}, env(), `--grace: want a number of seconds, got "x"`},
		{[]string{"--max-body-bytes", "-1"}, env(), `--max-body-bytes: want a number of bytes, got "-1"`},
		{[]string{"--max-requests", "0"}, env(), `--max-requests: want an integer of at least 1, got "0"`},
		{[]string{"--queue-timeout", "-1"}, env(), `--queue-timeout: want an integer of at least 0, got "-1"`},
		{[]string{"--worker-max-rss", "0"}, env(), `--worker-max-rss: want an integer of at least 1, got "0"`},
		{[]string{"--max-inflight-body-bytes", "x"}, env(), `--max-inflight-body-bytes: want an integer of at least 1, got "x"`},
		{[]string{"--hold-warn", "x"}, env(), `--hold-warn: want an integer of at least 0, got "x"`},
		{[]string{"--stall-warn", "x"}, env(), `--stall-warn: want an integer of at least 0, got "x"`},
		{[]string{"--min-upload-rate", "-5"}, env(), `--min-upload-rate: want an integer of at least 0, got "-5"`},
		{[]string{"--request-timeout", "0"}, env(), `--request-timeout: want a number of seconds above 0, got "0"`},
		{[]string{"--vm-hold-limit", "Inf"}, env(), `--vm-hold-limit: want a number of seconds above 0, got "Inf"`},
		{[]string{"--worker-timeout", "0"}, env(), `--worker-timeout: want a number of seconds above 0, got "0"`},
		{[]string{"--write-timeout", "-1"}, env(), `--write-timeout: want a number of seconds (0: never), got "-1"`},
		{[]string{"--max-requests-per-connection", "0"}, env(), `--max-requests-per-connection: want an integer of at least 1, got "0"`},
		{[]string{"--upstream", "x"}, env(), `--upstream: want NAME=URL[,URL...], got "x"`},
		{[]string{"--upstream", "a=ftp://x"}, env(), `--upstream a: "ftp://x" is not an http:// or https:// URL with no path`},
		{[]string{"--cluster", "x"}, env(), `--cluster: want NAME=URL[,URL...], got "x"`},
		{[]string{"--trusted-proxies", "10.0.0.0/8,bad"}, env(), `--trusted-proxies: "bad" is not an IP range (CIDR) or address`},
		{[]string{"--trusted-proxies", ""}, env(), `--trusted-proxies: "" is not an IP range (CIDR) or address`},
		{[]string{"-p", "http"}, env(), `port: want a number from 0 to 65535, got "http"`},
		{nil, env("PORT", "x"), `port: want a number from 0 to 65535, got "x"`},
		{[]string{"--admin-port", "70000"}, env(), `admin port: want a number from 0 to 65535, got "70000"`},
		{[]string{"--max-requests-per-client", "0"}, env(), `--max-requests-per-client: want an integer of at least 1, got "0"`},
		{[]string{"--admin-token-file", "/etc/hostname"}, env(), "--admin-token-file is the token of --admin-port: give both"},
		{[]string{"--admin-port", "1", "--admin-token-file", "/no/such/file"}, env(), "--admin-token-file: open /no/such/file: no such file or directory"},
		{[]string{"--admin-port", "1", "--admin-token-file", "/dev/null"}, env(), "--admin-token-file: /dev/null has no token on its first line"},
		{[]string{"-p", "3000", "--admin-port", "3000"}, env(), "--admin-port 3000 is the port the app is served on"},
		{[]string{"--tls-cert", "c.pem"}, env(), "--tls-cert and --tls-key go together"},
		{[]string{"--tls-internal", "--domain", "x"}, env(), "--tls-internal and --domain exclude each other"},
		{[]string{"--tls-client-ca", "ca.pem"}, env(), "--tls-client-ca needs HTTPS (--tls-cert, --tls-internal or --domain)"},
		{[]string{"-a", "unix:///tmp/r.sock", "-p", "80"}, env(), "--port and --address unix:///tmp/r.sock exclude each other: the socket is the address"},
		{[]string{"-a", "fd/2"}, env(), "--address fd/2: want fd/N with N a listening socket's descriptor, 3 or more"},
		{[]string{"--static", "/no/such/dir"}, env(), "--static: /no/such/dir is not a directory"},
		{[]string{"--sendfile-dir", "/no/such/dir"}, env(), "--sendfile-dir: /no/such/dir is not a directory"},
		{[]string{"--access-log-format", "apache"}, env(), `--access-log-format: want json or common, got "apache"`},
	}
	for _, c := range cases {
		_, err := parseOptions(c.args, c.getenv)
		if err == nil || err.Error() != c.err {
			t.Errorf("%q: got error %v, want %s", c.args, err, c.err)
		}
	}
}

func TestParseOptionsHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"app.ru", "--help"}, {"-h", "--bogus"}, {"-p", "80", "-h"}} {
		if _, err := parseOptions(args, env()); !errors.Is(err, errHelp) {
			t.Errorf("%q: got %v, want help", args, err)
		}
	}
}

// localhost is each loopback address, as Puma binds it; with -p 0 the
// first alone (each listener would get a port of its own).
func TestListens(t *testing.T) {
	loop := loopbacks()
	if loop[0] != "127.0.0.1" {
		t.Fatalf("loopbacks %v", loop)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{nil, []string{"127.0.0.1:8080"}},
		{[]string{"-a", "::1", "-p", "3000"}, []string{"[::1]:3000"}},
		{[]string{"-a", "0.0.0.0"}, []string{"0.0.0.0:8080"}},
		{[]string{"-a", "localhost", "-p", "0"}, []string{"127.0.0.1:0"}},
		{[]string{"-a", "unix:///tmp/r.sock"}, []string{"unix//tmp/r.sock|0660"}},
	}
	if len(loop) == 2 {
		cases = append(cases, struct {
			args []string
			want []string
		}{[]string{"-a", "localhost", "-p", "3000"}, []string{"127.0.0.1:3000", "[::1]:3000"}})
	}
	for _, c := range cases {
		o, err := parseOptions(c.args, env())
		if err != nil {
			t.Fatal(err)
		}
		if got := o.listens(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: listens %q, want %q", c.args, got, c.want)
		}
	}
}
