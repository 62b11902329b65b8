package vm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// sampleHead is a request head as the handler writes one: every kind of
// field and header, coded and not.
func sampleHead() []byte {
	b := wire.AppendRequestStart(nil, wire.ReqTLS|wire.ReqBody, 65536, 1<<62+12345)
	for i := 0; i < wire.FieldCount; i++ {
		switch i {
		case wire.FieldContentType:
			b = wire.AppendAbsent(b)
		case wire.FieldPath:
			b = wire.AppendString(b, "")
		default:
			b = wire.AppendString(b, strings.Repeat("f", i)+"\x00é")
		}
	}
	b, at := wire.AppendHeaderCount(b)
	b = wire.AppendHeader(b, "Accept", []string{"a", "b"}, ", ")
	b = wire.AppendHeader(b, "X-Custom-Thing", []string{"v"}, ", ")
	b = wire.AppendHeader(b, "Cookie", []string{"x=1", "y=2"}, "; ")
	b = wire.AppendHeader(b, "X-Requested-With", []string{""}, ", ")
	wire.PutHeaderCount(b, at, 4)
	return b
}

// The request head Go writes is what the VM reads, field by field, and
// what Go's own reader reads.
func TestRequestHeadGoToC(t *testing.T) {
	b := sampleHead()
	c, ok := readRequestHeadC(b)
	if !ok {
		t.Fatal("the C reader refused a head Go wrote")
	}
	g, err := wire.ReadRequestHead(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, g) {
		t.Fatalf("C read %+v\nGo read %+v", c, g)
	}
	want := []wire.RequestHeader{
		{Code: 1, Value: "a, b"},
		{Name: "HTTP_X_CUSTOM_THING", Value: "v"},
		{Code: 8, Value: "x=1; y=2"},
		{Code: 35, Value: ""},
	}
	if !reflect.DeepEqual(c.Headers, want) || wire.HeaderNames[35] != "X-Requested-With" {
		t.Fatalf("headers %+v, want %+v", c.Headers, want)
	}
	if c.Flags != wire.ReqTLS|wire.ReqBody || c.Window != 65536 || c.Arrived != 1<<62+12345 || c.Present[wire.FieldContentType] ||
		c.Fields[wire.FieldURI] != "fff\x00é" || !c.Present[wire.FieldPath] {
		t.Fatalf("fixed part %+v", c)
	}
	// Cut anywhere, the head is refused by both, never read past its end.
	for n := 0; n < len(b); n++ {
		if _, ok := readRequestHeadC(b[:n]); ok {
			t.Fatalf("C read a head cut at %d of %d", n, len(b))
		}
		if _, err := wire.ReadRequestHead(b[:n]); err == nil {
			t.Fatalf("Go read a head cut at %d of %d", n, len(b))
		}
	}
}

// The response head the VM writes is what the handler reads, byte for byte.
func TestResponseHeadCToGo(t *testing.T) {
	headers := [][2]string{{"content-type", "text/plain"}, {"x-empty", ""}, {"set-cookie", "a=1\x00"}}
	for _, tc := range []struct {
		length int64
		fd     int32
		body   string
	}{{-1, -1, ""}, {5, -1, "hello"}, {1 << 40, 7, ""}} {
		p := writeResponseHeadC(201, tc.length, tc.fd, headers, []byte(tc.body))
		h, err := wire.ReadResponseHead(p)
		if err != nil {
			t.Fatal(err)
		}
		if h.Length != tc.length || h.FD != tc.fd || !reflect.DeepEqual(h.Headers, headers) || string(h.Body) != tc.body {
			t.Fatalf("read %+v from %q", h, p)
		}
		if got := len(p) - len(tc.body); got != wire.RespHeadersAt+3*6+len("content-typetext/plainx-emptyset-cookiea=1\x00") {
			t.Fatalf("head is %d bytes", got)
		}
	}
}

// A log entry the VM writes is the strings Go reads; a string either side
// writes, the other reads.
func TestStringsBothWays(t *testing.T) {
	ss := []string{"msg", "", "backtrace", "a\nb", strings.Repeat("x", 70000)}
	if got := wire.ReadStrings(writeStringsC(ss)); !reflect.DeepEqual(got, ss) {
		t.Fatalf("Go read %d strings", len(got))
	}
	for _, s := range ss {
		b := wire.AppendString(nil, s)
		got, n, ok := readStringC(append(b, "rest"...))
		if !ok || string(got) != s || n != len(b) || got == nil {
			t.Fatalf("C read %q (%d, %v) from a string of %d", got, n, ok, len(s))
		}
	}
	if got, n, ok := readStringC(wire.AppendAbsent(nil)); !ok || got != nil || n != 4 {
		t.Fatal("C did not read an absent string as absent")
	}
	load := wire.AppendLoadApp(nil, "config.ru", "production", "a,b")
	if !bytes.Equal(load, writeStringsC([]string{"config.ru", "production", "a,b"})) {
		t.Fatal("a load-app payload is not the strings the VM reads")
	}
}

// A template's settings as the front end writes them are what
// rv_template.c reads; cut short, they are refused.
func TestTemplateSettingsGoToC(t *testing.T) {
	want := wire.TemplateSettings{VMConfig: wire.VMConfig{Program: "ruvoy", Args: []string{"-x", "", "ü"},
		RubyLib: []string{"<ruvoy>/a.rb", "A = 1\n"}, MaxStreams: 1 << 16, Window: 5 << 30},
		Rackup: "/srv/config.ru", Environment: "production", Upstreams: "a,b"}
	p := wire.AppendTemplateSettings(nil, want)
	got, load, ok := readTemplateSettingsC(p)
	wantLoad := wire.AppendLoadApp(nil, want.Rackup, want.Environment, want.Upstreams)
	if !ok || !bytes.Equal(load, wantLoad) {
		t.Fatalf("C read %+v, load %q (%v)", got, load, ok)
	}
	got.Rackup, got.Environment, got.Upstreams = want.Rackup, want.Environment, want.Upstreams
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("C read %+v, want %+v", got, want)
	}
	for _, n := range []int{0, 4, len(p) - 1} {
		if _, _, ok := readTemplateSettingsC(p[:n]); ok {
			t.Fatalf("C read settings cut to %d of %d bytes", n, len(p))
		}
	}
	if _, _, ok := readTemplateSettingsC(append(p, 0)); ok {
		t.Fatal("C read settings with a byte too many")
	}
}

// Whatever the bytes, the two request-head readers agree: both refuse,
// or both read the same head.
func FuzzRequestHeadReaders(f *testing.F) {
	f.Add(sampleHead())
	f.Add([]byte{})
	f.Add(wire.AppendRequestStart(nil, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, cok := readRequestHeadC(b)
		g, err := wire.ReadRequestHead(b)
		if cok != (err == nil) {
			t.Fatalf("C ok %v, Go error %v", cok, err)
		}
		if cok && !reflect.DeepEqual(c, g) {
			t.Fatalf("C read %+v\nGo read %+v", c, g)
		}
	})
}
