package ruvoycaddy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// accessEntry logs one access log entry through enc as Caddy's server
// does (the request given to With, the response's fields to the entry).
func accessEntry(t *testing.T, enc zapcore.Encoder, target string, withTLS bool) string {
	t.Helper()
	var out bytes.Buffer
	logger := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&out), zap.DebugLevel))
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = "192.0.2.7:5555"
	if withTLS {
		r.TLS = &tls.ConnectionState{NegotiatedProtocol: "http/1.1", ServerName: "example.com"}
	}
	logger.With(zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})).Info("handled request",
		zap.Int("bytes_read", 0), zap.String("user_id", "alice"), zap.Duration("duration", 1500*time.Microsecond),
		zap.Int("size", 12), zap.Int("status", 200),
		zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: map[string][]string{"Content-Type": {"text/plain"}}}))
	return out.String()
}

func TestCommonLog(t *testing.T) {
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	want := `192.0.2.7 - alice [` + now + `] "GET /x?y=1 HTTP/1.1" 200 12 0.0015` + "\n"
	if got := accessEntry(t, CommonLog{newFieldMap()}, "/x?y=1", false); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// TLS's fields (its own "proto") stay in their object.
	if got := accessEntry(t, CommonLog{newFieldMap()}, "/x?y=1", true); got != want {
		t.Errorf("over TLS: got  %q\nwant %q", got, want)
	}
	// What is not printable is escaped, as Rack::CommonLogger does.
	if got := printable("GET /a\x01b\xff é"); got != `GET /a\x1b\xff é` {
		t.Errorf("printable %q", got)
	}
}

// Behind the filter encoder, as ruvoy's own config puts it: the query
// filtered, the request's fields still read from their object (the
// filter hands an object's marshaler itself, not the object's encoder).
func TestCommonLogFiltered(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	filter, _ := json.Marshal(QueryFilter{Names: []string{"passw"}})
	var fields map[string]any
	json.Unmarshal(filter, &fields)
	fields["filter"] = "ruvoy_query"
	raw, _ := json.Marshal(fields)
	fe := &logging.FilterEncoder{
		WrappedRaw: json.RawMessage(`{"format":"ruvoy_common"}`),
		FieldsRaw:  map[string]json.RawMessage{"request>uri": raw},
	}
	if err := fe.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	want := `192.0.2.7 - alice [` + now + `] "GET /login?user=bob&password=[FILTERED] HTTP/1.1" 200 12 0.0015` + "\n"
	if got := accessEntry(t, fe, "/login?user=bob&password=hunter2", true); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The default log's format writes nothing for Caddy's farewell, and the
// rest as Caddy's default would (JSON here: stderr is not a terminal).
func TestDefaultLogDropsTheFarewell(t *testing.T) {
	e := &DefaultLog{}
	e.Provision(caddy.Context{})
	var out bytes.Buffer
	logger := zap.New(zapcore.NewCore(e, zapcore.AddSync(&out), zap.DebugLevel))
	logger.Warn(caddyFarewell, zap.String("signal", "SIGINT"))
	if out.Len() != 0 {
		t.Errorf("the farewell was written: %q", out.String())
	}
	logger.Named("tls").Warn(caddyFarewell)
	logger.Warn("force quit", zap.String("signal", "SIGINT"))
	var entry map[string]any
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 || json.Unmarshal(lines[1], &entry) != nil || entry["msg"] != "force quit" || entry["signal"] != "SIGINT" {
		t.Errorf("the other entries: %q", out.String())
	}
}
