package ruvoycaddy

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/ruvoy/ruvoy/internal/settings"
)

// The Caddyfile names each setting as the JSON config does; the earlier
// spellings are refused with the name to use.
func TestCaddyfileSizeNames(t *testing.T) {
	var h Handler
	d := caddyfile.NewTestDispenser(`ruvoy config.ru {
		max_body_bytes 1MB
		max_inflight_body_bytes 64MiB
		upstream {
			max_response_bytes 2MB
		}
	}`)
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if h.MaxBodyBytes != 1000000 || h.MaxInflightBodyBytes != 64<<20 || h.Upstream == nil || h.Upstream.MaxResponseBytes != 2000000 {
		t.Fatalf("read %+v", h)
	}
	for old, name := range map[string]string{
		"max_body_size 1MB":                      "max_body_bytes",
		"max_inflight_body_size 1MB":             "max_inflight_body_bytes",
		"upstream {\n max_response_size 1MB\n }": "max_response_bytes",
	} {
		err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\n" + old + "\n}"))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%q: %v, want an error naming %s", old, err, name)
		}
	}
}

// workers takes a number or auto; anything else is refused.
func TestCaddyfileWorkers(t *testing.T) {
	for text, want := range map[string]int{"workers 3": 3, "workers auto": runtime.NumCPU(), "workers 0": 0} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\n" + text + "\nworker_max_rss_bytes 512MiB\n}")); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if h.Workers != want || h.WorkerMaxRSSBytes != 512<<20 {
			t.Errorf("%q: workers %d, max rss %d", text, h.Workers, h.WorkerMaxRSSBytes)
		}
	}
	for _, bad := range []string{"workers", "workers -1", "workers many", "workers 1000"} {
		if err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\n" + bad + "\n}")); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// early_hints_http1 and preload take no argument.
func TestCaddyfileFlags(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\nearly_hints_http1\npreload\n}")); err != nil {
		t.Fatal(err)
	}
	if !h.EarlyHintsHTTP1 || !h.Preload {
		t.Fatalf("early_hints_http1 %v, preload %v: want both read", h.EarlyHintsHTTP1, h.Preload)
	}
	for _, bad := range []string{"early_hints_http1 yes", "preload yes"} {
		if err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\n" + bad + "\n}")); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// ruvoy_drain takes a delay; ruvoy_health takes nothing but its matcher.
func TestCaddyfileDrainAndHealth(t *testing.T) {
	var d Drain
	if err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy_drain {\ndelay 5s\n}")); err != nil || d.Delay != 5e9 {
		t.Fatalf("ruvoy_drain { delay 5s }: %v, delay %v", err, d.Delay)
	}
	for _, bad := range []string{"ruvoy_drain 5s", "ruvoy_drain {\ndelay\n}", "ruvoy_drain {\ndelay soon\n}", "ruvoy_drain {\nwait 5s\n}"} {
		if err := new(Drain).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q: taken", bad)
		}
	}
	if err := (Health{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy_health")); err != nil {
		t.Fatal(err)
	}
	if err := (Health{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy_health {\nstrict\n}")); err == nil {
		t.Error("ruvoy_health with an option: taken")
	}
}

// The places: max_requests, per connection and per client, each a
// positive integer.
func TestCaddyfilePlaces(t *testing.T) {
	var h Handler
	d := caddyfile.NewTestDispenser("ruvoy config.ru {\nmax_requests 512\nmax_requests_per_connection 50\nmax_requests_per_client 64\n}")
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if h.MaxRequests != 512 || h.MaxRequestsPerConn != 50 || h.MaxRequestsPerClient != 64 {
		t.Fatalf("read %+v", h)
	}
	for _, bad := range []string{"max_requests_per_client", "max_requests_per_client 0", "max_requests_per_client x"} {
		if err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy config.ru {\n" + bad + "\n}")); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// caddyfileExamples are an argument of each syntax the table's readers
// take in the Caddyfile.
var caddyfileExamples = map[string]string{
	"<name>": "production", "<path>": "app.ru", "<n>": "2", "<n>|auto": "auto", "<duration>": "2s",
	"<size>": "1MiB", "<dir...>": "/srv/a /srv/b",
}

// Every handler setting of the table is a key of the directive, which sets
// the JSON field of its name.
func TestCaddyfileReadsEverySetting(t *testing.T) {
	for _, s := range settings.Table {
		if s.JSON == "" {
			continue
		}
		line := s.JSON + " " + caddyfileExamples[s.Read.Syntax]
		if s.Read.Block {
			line = s.JSON + " {\n}"
		}
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy {\n" + line + "\n}")); err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		raw, _ := json.Marshal(&h)
		var fields map[string]json.RawMessage
		json.Unmarshal(raw, &fields)
		if fields[s.JSON] == nil {
			t.Errorf("%q sets no %s: %s", line, s.JSON, raw)
		}
	}
}

// Former names still work, each with a warning (the Caddyfile's as it is
// adapted, the JSON's as the handler is provisioned).
func TestRenames(t *testing.T) {
	var h Handler
	d := caddyfile.NewTestDispenser("ruvoy config.ru {\nstall_warn 300ms\nupstream {\nupstreams a\nclusters b\n}\n}")
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if h.HoldWarn == nil || *h.HoldWarn != caddy.Duration(300*time.Millisecond) || !reflect.DeepEqual(h.Upstream.Upstreams, []string{"a", "b"}) {
		t.Errorf("Caddyfile: hold_warn %v, upstreams %v", h.HoldWarn, h.Upstream.Upstreams)
	}

	h = Handler{}
	err := caddy.StrictUnmarshalJSON([]byte(`{"stall_warn": "1s", "upstream": {"clusters": ["b"], "upstreams": ["a"]}}`), &h)
	if err != nil || h.HoldWarn == nil || *h.HoldWarn != caddy.Duration(time.Second) || !reflect.DeepEqual(h.Upstream.Upstreams, []string{"a", "b"}) {
		t.Fatalf("JSON: %v, %+v", err, h)
	}
	want := []string{`the handler's "stall_warn" is deprecated: it is now "hold_warn"`,
		`the handler's "upstream.clusters" is deprecated: it is now "upstream.upstreams"`}
	if !reflect.DeepEqual(h.renamed, want) {
		t.Errorf("JSON warnings %q", h.renamed)
	}
	if err := caddy.StrictUnmarshalJSON([]byte(`{"stall_warm": "1s"}`), &Handler{}); err == nil {
		t.Error("an unknown key was taken")
	}

	var app Upstreams
	if err := caddy.StrictUnmarshalJSON([]byte(`{"clusters": {"a": {}}}`), &app); err != nil || app.Upstreams["a"] == nil || len(app.renamed) != 1 {
		t.Errorf("the app's clusters: %v, %+v", err, app)
	}
}

// docs/configuration.md lists every handler setting: in the JSON table,
// and in the Caddyfile block with its syntax.
func TestEverySettingIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := string(b)
	for _, s := range settings.Table {
		if s.JSON == "" {
			continue
		}
		if !strings.Contains(docs, "| `"+s.JSON+"` |") {
			t.Errorf("docs/configuration.md: the handler's table lacks %s", s.JSON)
		}
		syntax := regexp.QuoteMeta(s.Read.Syntax)
		if s.Read.Block {
			syntax = `\{`
		}
		if !regexp.MustCompile(`(?m)^\t` + s.JSON + ` *` + syntax + `$`).MatchString(docs) {
			t.Errorf("docs/configuration.md: the Caddyfile block lacks %q", s.JSON+" "+s.Read.Syntax)
		}
	}
}
