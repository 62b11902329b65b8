package ruvoycaddy

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The guard itself is internal/h1guard's, tested there; these test what
// the module hands it: NoH2C, the server's header limit, the log.

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestHTTP1GuardWrapListener(t *testing.T) {
	preface := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	// A head whose end never comes: past the guard's limit it is refused;
	// within it, Go gets it as it is at EOF.
	head := "GET / HTTP/1.1\r\nX: " + strings.Repeat("b", 8000)
	for _, tc := range []struct {
		name   string
		g      HTTP1Guard
		in     string
		passes bool
	}{
		{"h2c", HTTP1Guard{}, preface, true},
		{"no h2c", HTTP1Guard{NoH2C: true}, preface, false},
		{"Caddy's default header limit", HTTP1Guard{}, head, true},
		{"the server's header limit", HTTP1Guard{maxHeaderBytes: 1024}, head, false},
	} {
		inner := listenLocal(t)
		client, server := connect(t, inner, tc.g.WrapListener(inner))
		client.Write([]byte(tc.in))
		client.(*net.TCPConn).CloseWrite()
		got, _ := io.ReadAll(server)
		if passed := string(got) == tc.in; passed != tc.passes {
			t.Errorf("%s: Go read %.60q; passed %v, want %v", tc.name, got, passed, tc.passes)
		}
	}
}

// Placed before tls, the guard says so in the log, once per listener.
func TestHTTP1GuardWarnsBeforeTLS(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	g := HTTP1Guard{logger: zap.New(core)}
	inner := listenLocal(t)
	l := g.WrapListener(inner)
	for range 2 {
		client, server := connect(t, inner, l)
		client.Write([]byte("\x16\x03\x01\x00\x05hello"))
		server.Read(make([]byte, 64))
	}
	if logs.Len() != 1 {
		t.Fatalf("%d warnings, want 1", logs.Len())
	}
	e := logs.All()[0]
	if !strings.Contains(e.Message, "placed before tls") || e.ContextMap()["listener_wrappers"] != "ruvoy_drain ruvoy_connection_ids tls ruvoy_http1_guard" {
		t.Fatalf("the warning: %q %v", e.Message, e.ContextMap())
	}
}

func TestHTTP1GuardCaddyfile(t *testing.T) {
	if err := new(HTTP1Guard).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy_http1_guard")); err != nil {
		t.Fatal(err)
	}
	if err := new(HTTP1Guard).UnmarshalCaddyfile(caddyfile.NewTestDispenser("ruvoy_http1_guard no_h2c")); err == nil {
		t.Fatal("an option was taken")
	}
}
