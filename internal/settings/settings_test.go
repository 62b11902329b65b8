package settings

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The table holds together: one setting per name, a reader for each,
// help for each flag, defaults that pass their own check and that the
// help states, renames to names that exist.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	once := func(prefix, name string) {
		if name != "" && seen[prefix+name] {
			t.Errorf("%s%s is declared twice", prefix, name)
		}
		seen[prefix+name] = true
	}
	for _, s := range Table {
		once("--", s.Flag)
		once("-", s.Short)
		once("--", s.Alias)
		once("", s.JSON)
		switch {
		case s.Flag == "" && s.JSON == "":
			t.Errorf("%+v: neither a flag nor a JSON field", s)
		case s.Flag == "help":
			continue
		case s.Read.Flag == nil:
			t.Errorf("%s: no reader", s.Flag+s.JSON)
		case s.Flag != "" && s.Help == "":
			t.Errorf("--%s: no help", s.Flag)
		case s.JSON != "" && s.Read.Syntax == "" && !s.Read.Switch && !s.Read.Block:
			t.Errorf("%s: no Caddyfile syntax", s.JSON)
		case s.Needs != "" && (ByJSON(s.Needs) == nil || s.Why == ""):
			t.Errorf("%s needs %q, which is no setting, or does not say why", s.JSON, s.Needs)
		}
		if s.Default != "" {
			if _, err := s.ReadFlag(s.FlagName(), s.Default); err != nil {
				t.Errorf("--%s: its default fails its check: %v", s.Flag, err)
			}
			if !strings.Contains(s.Help, s.Default) {
				t.Errorf("--%s: its help does not say its default, %s", s.Flag, s.Default)
			}
		}
		if s.Env != "" && !strings.Contains(s.Help, "$"+s.Env) {
			t.Errorf("--%s: its help does not name $%s", s.Flag, s.Env)
		}
	}
	for _, r := range Renames {
		first, _, _ := strings.Cut(r.New, ".")
		switch {
		case r.In == InFlags && ByFlag(r.New) == nil,
			(r.In == InHandlerJSON || r.In == InCaddyfile) && ByJSON(first) == nil:
			t.Errorf("%s is renamed to %s, which is no setting", r.Old, r.New)
		case r.In == InFlags && ByFlag(r.Old) != nil:
			t.Errorf("--%s is a flag and a former name", r.Old)
		}
	}
}

func TestUsage(t *testing.T) {
	u := Usage()
	for _, line := range strings.Split(strings.TrimSuffix(u, "\n"), "\n") {
		if len(line) > helpWidth {
			t.Errorf("a line over %d columns: %q", helpWidth, line)
		}
	}
	for _, want := range []string{
		"    -p, --port PORT          Listen on PORT (default 8080, or $PORT when set)\n",
		"        --worker-max-rss MIB Replace a worker",                                 // fits beside its name
		"        --worker-timeout SECONDS\n" + strings.Repeat(" ", helpColumn) + "Kill", // does not
		"    -h, --help               Print this usage and exit\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q:\n%s", want, u)
		}
	}
	if strings.Contains(u, "--rackup") || strings.Contains(u, "stall-warn") {
		t.Errorf("usage shows a setting without a flag, or a former name:\n%s", u)
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aa bb cc  dd eeeeeeeee f", 5)
	want := []string{"aa bb", "cc dd", "eeeeeeeee", "f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("wrap: %q, want %q", got, want)
	}
}

// One reader serves a flag and a Caddyfile key, with one wording.
func TestReaders(t *testing.T) {
	cases := []struct {
		setting, flag, caddyfile string
		flagWant, caddyfileWant  any
	}{
		{"max_requests", "8", "8", 8, 8},
		{"queue_timeout", "250", "250ms", 250 * time.Millisecond, 250 * time.Millisecond},
		{"request_timeout", "1.5", "1500ms", 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"worker_max_rss_bytes", "512", "512MiB", int64(512 << 20), int64(512 << 20)},
		{"max_body_bytes", "1000", "1kB", 1000, int64(1000)},
		{"workers", "3", "3", 3, 3},
		{"sendfile_dirs", "/srv", "/srv", []string{"/srv"}, []string{"/srv"}},
		{"preload", "", "", true, true},
	}
	for _, c := range cases {
		s := ByJSON(c.setting)
		if got, err := s.ReadFlag("--x", c.flag); err != nil || !reflect.DeepEqual(got, c.flagWant) {
			t.Errorf("%s: flag %q read as %#v, %v", c.setting, c.flag, got, err)
		}
		if got, err := s.ReadCaddyfile(c.caddyfile); err != nil || !reflect.DeepEqual(got, c.caddyfileWant) {
			t.Errorf("%s: Caddyfile %q read as %#v, %v", c.setting, c.caddyfile, got, err)
		}
	}
	errs := []struct{ setting, name, value, err string }{
		{"max_requests", "--max-requests", "0", `--max-requests: want an integer of at least 1, got "0"`},
		{"max_requests", "max_requests", "x", `max_requests: want an integer of at least 1, got "x"`},
		{"workers", "-w", "257", `-w: want a number of workers from 0 to 256, or auto, got "257"`},
		{"workers", "WEB_CONCURRENCY", "x", `WEB_CONCURRENCY: want a number of workers from 0 to 256, or auto, got "x"`},
		{"request_timeout", "--request-timeout", "NaN", `--request-timeout: want a number of seconds above 0, got "NaN"`},
	}
	for _, e := range errs {
		if _, err := ByJSON(e.setting).ReadFlag(e.name, e.value); err == nil || err.Error() != e.err {
			t.Errorf("%s %q: %v, want %s", e.name, e.value, err, e.err)
		}
	}
	if _, err := ByJSON("hold_warn").ReadCaddyfile("soon"); err == nil || err.Error() != `hold_warn: want a duration such as 250ms or 30s, got "soon"` {
		t.Errorf("hold_warn soon: %v", err)
	}
}

// A former name's value moves to the new name: it joins a list, and
// loses to a value the new name has.
func TestRenameJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"stall_warn": "1s"}`, `{"hold_warn":"1s"}`},
		{`{"stall_warn": "1s", "hold_warn": "2s"}`, `{"hold_warn":"2s"}`},
		{`{"upstream": {"clusters": ["a"], "timeout_ms": 5}}`, `{"upstream":{"timeout_ms":5,"upstreams":["a"]}}`},
		{`{"upstream": {"clusters": ["a"], "upstreams": ["b"]}}`, `{"upstream":{"upstreams":["b","a"]}}`},
		{`{"upstream": null}`, `{"upstream": null}`},
		{`{"hold_warn": "1s"}`, `{"hold_warn": "1s"}`},
		{`[]`, `[]`},
	}
	for _, c := range cases {
		out, warnings, err := RenameJSON(InHandlerJSON, []byte(c.in))
		if err != nil || string(out) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.in, out, err, c.want)
		}
		if (string(out) != c.in) != (len(warnings) > 0) {
			t.Errorf("%s: warnings %q", c.in, warnings)
		}
	}
	out, warnings, _ := RenameJSON(InAppJSON, []byte(`{"clusters": {"a": {}}, "upstreams": {"b": {}}}`))
	if string(out) != `{"upstreams":{"a":{},"b":{}}}` || len(warnings) != 1 ||
		warnings[0] != `the "ruvoy" app's "clusters" is deprecated: it is now "upstreams"` {
		t.Errorf("the app's clusters: %s, %q", out, warnings)
	}
}

// The preload rule, checked once for flags and for the JSON.
func TestUnmet(t *testing.T) {
	type handler struct {
		Workers int  `json:"workers,omitempty"`
		Preload bool `json:"preload,omitempty"`
	}
	if err := Unmet(handler{Preload: true, Workers: 2}, true); err != nil {
		t.Error(err)
	}
	if err := Unmet(handler{}, false); err != nil {
		t.Error(err)
	}
	err := Unmet(handler{Preload: true}, true)
	if err == nil || err.Error() != "--preload forks workers: give --workers N (or WEB_CONCURRENCY) too" {
		t.Errorf("flags: %v", err)
	}
	err = Unmet(handler{Preload: true}, false)
	if err == nil || err.Error() != "preload forks workers: give workers too" {
		t.Errorf("JSON: %v", err)
	}
}

func TestValues(t *testing.T) {
	v := Values{}
	v.Add(ByJSON("sendfile_dirs"), []string{"/a"})
	v.Add(ByJSON("sendfile_dirs"), []string{"/b"})
	v.Add(ByJSON("max_requests"), 1)
	v.Add(ByJSON("max_requests"), 2)
	var dst struct {
		SendfileDirs []string `json:"sendfile_dirs"`
		MaxRequests  int      `json:"max_requests"`
	}
	if err := v.Decode(&dst); err != nil || !reflect.DeepEqual(dst.SendfileDirs, []string{"/a", "/b"}) || dst.MaxRequests != 2 {
		t.Errorf("%+v, %v", dst, err)
	}
	var narrow struct{}
	if err := v.Decode(&narrow); err == nil {
		t.Error("a field the handler lacks was taken")
	}
}
