package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	ruvoycaddy "github.com/ruvoy/ruvoy/caddy"
)

// strict decodes as Caddy does a module's JSON: an unknown key is an error.
func strict(t *testing.T, raw []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
}

// configFor is the config buildConfig makes for args, and its server.
func configFor(t *testing.T, args ...string) (*caddy.Config, *caddyhttp.App, *caddyhttp.Server) {
	t.Helper()
	o, err := parseOptions(append(args, "app.ru"), env())
	if err != nil {
		t.Fatal(err)
	}
	out, err := buildConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	var cfg caddy.Config
	strict(t, out, &cfg)
	var app caddyhttp.App
	strict(t, cfg.AppsRaw["http"], &app)
	return &cfg, &app, app.Servers["ruvoy"]
}

// ruvoyHandler is the last handler of the server's last route, without
// its "handler" key.
func ruvoyHandler(t *testing.T, srv *caddyhttp.Server) ruvoycaddy.Handler {
	t.Helper()
	handlers := srv.Routes[len(srv.Routes)-1].HandlersRaw
	var m map[string]any
	strict(t, handlers[len(handlers)-1], &m)
	if m["handler"] != "ruvoy" {
		t.Fatalf("the last handler is %v, not ruvoy", m["handler"])
	}
	delete(m, "handler")
	raw, _ := json.Marshal(m)
	var h ruvoycaddy.Handler
	strict(t, raw, &h)
	return h
}

func TestBuildConfigHandler(t *testing.T) {
	_, app, srv := configFor(t, "--queue-timeout", "250", "--hold-warn", "0", "--request-timeout", "2.5",
		"--vm-hold-limit", "30", "--max-requests", "7", "--context", "--upstream", "users=https://10.0.0.1", "--grace", "5", "--early-hints-http1")
	if app.GracePeriod != caddy.Duration(5*time.Second) {
		t.Errorf("grace_period %v", time.Duration(app.GracePeriod))
	}
	h := ruvoyHandler(t, srv)
	ms := func(n int) caddy.Duration { return caddy.Duration(time.Duration(n) * time.Millisecond) }
	if h.QueueTimeout != ms(250) || h.RequestTimeout != ms(2500) || h.HoldWarn == nil || *h.HoldWarn != 0 ||
		h.VMHoldLimit == nil || *h.VMHoldLimit != ms(30000) || h.MaxRequests != 7 || h.Context == nil || !h.EarlyHintsHTTP1 {
		t.Errorf("handler %+v", h)
	}
	if h.Upstream == nil || !reflect.DeepEqual(h.Upstream.Upstreams, []string{"users"}) {
		t.Errorf("upstream %+v", h.Upstream)
	}

	_, _, srv = configFor(t)
	if h := ruvoyHandler(t, srv); h.HoldWarn != nil || h.VMHoldLimit != nil || h.Context != nil || h.Upstream != nil || h.EarlyHintsHTTP1 {
		t.Errorf("defaults are set: %+v", h)
	}
}

func TestBuildConfigDomain(t *testing.T) {
	_, _, srv := configFor(t, "--domain", "example.com", "--static", t.TempDir())
	if srv.AutoHTTPS != nil {
		t.Errorf("automatic HTTPS is not on: %+v", srv.AutoHTTPS)
	}
	if len(srv.Routes) != 2 {
		t.Fatalf("%d routes", len(srv.Routes))
	}
	for i, r := range srv.Routes {
		if len(r.MatcherSetsRaw) == 0 {
			t.Errorf("route %d matches every host", i)
		}
		for _, set := range r.MatcherSetsRaw {
			var host caddyhttp.MatchHost
			if json.Unmarshal(set["host"], &host) != nil || !reflect.DeepEqual(host, caddyhttp.MatchHost{"example.com"}) {
				t.Errorf("route %d: host matcher %s", i, set["host"])
			}
		}
	}
}

func TestBuildConfigClusterTwice(t *testing.T) {
	o, err := parseOptions([]string{"--upstream", "a=http://127.0.0.1:9", "--upstream", "a=http://127.0.0.1:10", "app.ru"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildConfig(o); err == nil || !strings.Contains(err.Error(), "--upstream a is given twice") {
		t.Errorf("error %v", err)
	}
}

// Caddy's admin API, which takes no credential, listens on a unix socket of
// mode 0600 only: --admin-socket's, or one of the server's own behind
// --admin-port's gate; metrics are on whenever it listens.
func TestBuildConfigAdmin(t *testing.T) {
	cfg, app, _ := configFor(t)
	if !cfg.Admin.Disabled || app.Metrics != nil {
		t.Errorf("without --admin-port: admin %+v, metrics %+v", cfg.Admin, app.Metrics)
	}
	cfg, app, _ = configFor(t, "--admin-socket", "/run/ruvoy/admin.sock")
	if cfg.Admin.Disabled || cfg.Admin.Listen != "unix//run/ruvoy/admin.sock|0600" || app.Metrics == nil {
		t.Errorf("--admin-socket: admin %+v, metrics %+v", cfg.Admin, app.Metrics)
	}
	o, _ := parseOptions([]string{"--admin-port", "2019", "app.ru"}, env())
	o.adminDir = "/tmp/ruvoy-admin-1"
	if got := o.adminListen(); got != "unix//tmp/ruvoy-admin-1/admin.sock|0600" {
		t.Errorf("--admin-port: Caddy's admin API listens on %q", got)
	}
	if strings.Contains(o.adminListen(), "2019") {
		t.Errorf("Caddy's admin API listens on the admin port")
	}
}

// The logs: the default one drops Caddy's farewell (ruvoy_default); the
// access log is Caddy's choice, JSON, or the common log format, each
// behind the query filter.
func TestBuildConfigLogs(t *testing.T) {
	for _, c := range []struct {
		args []string
		wrap string // the filter encoder's wrapped format; "": none
	}{
		{[]string{"--access-log"}, ""},
		{[]string{"--access-log-format", "json"}, `{"format":"json"}`},
		{[]string{"--access-log-format", "common"}, `{"format":"ruvoy_common"}`},
	} {
		cfg, _, srv := configFor(t, c.args...)
		if srv.Logs == nil {
			t.Errorf("%q: no access log", c.args)
		}
		var enc map[string]json.RawMessage
		strict(t, cfg.Logging.Logs["access"].EncoderRaw, &enc)
		if string(enc["format"]) != `"filter"` || compact(enc["wrap"]) != c.wrap {
			t.Errorf("%q: the access log's format %s", c.args, cfg.Logging.Logs["access"].EncoderRaw)
		}
		if got := compact(cfg.Logging.Logs["default"].EncoderRaw); got != `{"format":"ruvoy_default"}` {
			t.Errorf("the default log's format %s", got)
		}
	}
	if cfg, _, srv := configFor(t); srv.Logs != nil || cfg.Logging.Logs["access"] != nil {
		t.Errorf("an access log without --access-log")
	}
}

// -a localhost listens on each loopback address.
func TestBuildConfigLocalhost(t *testing.T) {
	_, _, srv := configFor(t, "-a", "localhost", "-p", "3000")
	want := []string{"127.0.0.1:3000"}
	if len(loopbacks()) == 2 {
		want = append(want, "[::1]:3000")
	}
	if !reflect.DeepEqual(srv.Listen, want) {
		t.Errorf("listen %q, want %q", srv.Listen, want)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	json.Compact(&b, raw)
	return b.String()
}
