package test

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// standIn is the upstream service the extensions tests call.
type standIn struct {
	*httptest.Server
	cancelled atomic.Int64 // calls whose caller went away
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/users/"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			fmt.Fprintf(w, `{"id":%q,"accept":%q}`, strings.TrimPrefix(r.URL.Path, "/users/"), r.Header.Get("Accept"))
		case r.URL.Path == "/slow":
			ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				fmt.Fprintf(w, "slow %s", r.URL.Query().Get("n"))
			case <-r.Context().Done():
				s.cancelled.Add(1)
			}
		case r.URL.Path == "/big":
			w.Write(make([]byte, 2<<20))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// extensionsConfig is a Caddy config: the users and stopped upstreams, a
// plaintext server and an mTLS server, each with a vars handler ahead of
// ruvoy (context and upstream on).
func extensionsConfig(t *testing.T, c *certs, port, tlsPort, users, stopped string, workers int) string {
	rackup, _ := filepath.Abs(app("extensions.ru"))
	handle := []any{
		map[string]any{"handler": "vars", "acme.tenant.id": "t-42", "acme.tenant.tier": "gold", "other.ns.secret": "hidden"},
		map[string]any{
			"handler": "ruvoy", "rackup": rackup,
			"context": map[string]any{
				"metadata_namespaces": []string{"acme.tenant"},
				"route_name":          "api",
				"route_metadata": map[string]any{
					"acme.tenant": map[string]any{"plan": "gold"},
					"other.ns":    map[string]any{"hidden": true},
				},
			},
			"upstream": map[string]any{"upstreams": []string{"users", "stopped", "ghost"}, "timeout_ms": 15000,
				"max_response_bytes": 1 << 20},
			"workers": workers,
		},
	}
	caDER, _ := pem.Decode(c.caPEM)
	cfg := map[string]any{
		"admin": map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"apps": map[string]any{
			"ruvoy": map[string]any{"upstreams": map[string]any{
				"users":   map[string]any{"upstreams": []any{map[string]any{"dial": users}}},
				"stopped": map[string]any{"upstreams": []any{map[string]any{"dial": stopped}}},
			}},
			"tls": map[string]any{"certificates": map[string]any{"load_files": []any{
				map[string]any{"certificate": c.serverCert, "key": c.serverKey},
			}}},
			"http": map[string]any{"servers": map[string]any{
				"plain": map[string]any{
					"listen":            []string{"127.0.0.1:" + port},
					"automatic_https":   map[string]any{"disable": true},
					"listener_wrappers": []any{map[string]any{"wrapper": "ruvoy_connection_ids"}},
					"routes":            []any{map[string]any{"handle": handle}},
				},
				"mtls": map[string]any{
					"listen":            []string{"127.0.0.1:" + tlsPort},
					"automatic_https":   map[string]any{"disable": true},
					"listener_wrappers": []any{map[string]any{"wrapper": "ruvoy_connection_ids"}, map[string]any{"wrapper": "tls"}},
					"tls_connection_policies": []any{map[string]any{
						"client_authentication": map[string]any{
							"mode": "require_and_verify",
							"ca":   map[string]any{"provider": "inline", "trusted_ca_certs": []string{base64.StdEncoding.EncodeToString(caDER.Bytes)}},
						},
					}},
					"routes": []any{map[string]any{"handle": handle}},
				},
			}},
		},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(t.TempDir(), "extensions.json")
	os.WriteFile(path, b, 0o644)
	return path
}

type extServer struct {
	*server
	tlsURL string
	mtls   *http.Client
	up     *standIn
}

func startExtensions(t *testing.T) *extServer {
	t.Helper()
	return startExtensionsIn(t, 0)
}

// startExtensionsIn runs the app in that many worker processes (0: in
// ruvoy's own process).
func startExtensionsIn(t *testing.T, workers int) *extServer {
	t.Helper()
	c := makeCerts(t)
	up := newStandIn(t)
	port, tlsPort := freePort(t), freePort(t)
	stopped := "127.0.0.1:" + freePort(t) // nothing listens there
	cfg := extensionsConfig(t, c, port, tlsPort, strings.TrimPrefix(up.URL, "http://"), stopped, workers)
	s := launch(t, port, "run", "--config", cfg)
	s.waitReady(t)
	mtls := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{c.clientCert}},
		ForceAttemptHTTP2: true,
	}}
	// By name: with client authentication on, Caddy wants the TLS server
	// name to match the Host.
	return &extServer{server: s, tlsURL: "https://localhost:" + tlsPort, mtls: mtls, up: up}
}

func getJSON(t testing.TB, c *http.Client, url string) map[string]any {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %d %s", url, res.StatusCode, b)
	}
	return v
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestExtensionsContextPlaintext(t *testing.T) {
	s := startExtensions(t)
	ctx := getJSON(t, client, s.url+"/context")
	equal(t, "route_name", ctx["route_name"], any("api"))
	equal(t, "tls", ctx["tls"], nil)
	equal(t, "dynamic_metadata", asJSON(ctx["dynamic_metadata"]), `{"acme.tenant":{"id":"t-42","tier":"gold"}}`)
	equal(t, "route_metadata", asJSON(ctx["route_metadata"]), `{"acme.tenant":{"plan":"gold"}}`)
	conn := ctx["connection"].(map[string]any)
	equal(t, "source_address", conn["source_address"], any("127.0.0.1"))
	equal(t, "destination_port", fmt.Sprint(conn["destination_port"]), strings.TrimPrefix(s.addr, "127.0.0.1:"))
	if _, ok := conn["id"].(float64); !ok {
		t.Fatalf("connection id: %v", conn["id"])
	}
	// The same connection keeps its id; a new one gets another.
	again := getJSON(t, client, s.url+"/context")["connection"].(map[string]any)
	equal(t, "same connection, same id", again["id"], conn["id"])
	other := getJSON(t, &http.Client{Transport: &http.Transport{}}, s.url+"/context")["connection"].(map[string]any)
	if other["id"] == conn["id"] {
		t.Fatalf("a new connection got the same id %v", other["id"])
	}
	equal(t, "to_h has everything", asJSON(ctx["to_h"].(map[string]any)["route_name"]), `"api"`)
}

func TestExtensionsContextMutualTLS(t *testing.T) {
	s := startExtensions(t)
	ctx := getJSON(t, s.mtls, s.tlsURL+"/context")
	info := ctx["tls"].(map[string]any)
	equal(t, "version", info["version"], any("TLS 1.3"))
	equal(t, "alpn", info["alpn"], any("h2"))
	equal(t, "server_name", info["server_name"], any("localhost"))
	equal(t, "uri_san", asJSON(info["uri_san"]), `["spiffe://ruvoy.test/client"]`)
	equal(t, "dns_san", asJSON(info["dns_san"]), `["client.ruvoy.test"]`)
	pemText, _ := info["peer_certificate"].(string)
	if !strings.HasPrefix(pemText, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("peer_certificate: %q", pemText)
	}
	if info["cipher"] == "" || info["cipher"] == nil {
		t.Fatalf("no cipher: %v", info)
	}
}

func TestExtensionsUpstreamCalls(t *testing.T) {
	s := startExtensions(t)
	r := getJSON(t, client, s.url+"/user?id=42")
	equal(t, "status", r["status"], any(float64(200)))
	equal(t, "body", r["body"], any(`{"id":"42","accept":"application/json"}`))
	headers := r["headers"].(map[string]any)
	equal(t, "a repeated header is an Array", asJSON(headers["set-cookie"]), `["a=1","b=2"]`)

	// Two 300 ms calls from one request, from separate fibers: about 300 ms.
	r = getJSON(t, client, s.url+"/two-slow")
	equal(t, "bodies", asJSON(r["bodies"]), `["slow 0","slow 1"]`)
	if secs := r["seconds"].(float64); secs > 0.55 {
		t.Fatalf("two 300 ms calls took %.3fs: they did not overlap", secs)
	}

	equal(t, "timed out", getJSON(t, client, s.url+"/timeout")["status"], any(float64(504)))
	equal(t, "stopped upstream", getJSON(t, client, s.url+"/stopped")["status"], any(float64(503)))
	r = getJSON(t, client, s.url+"/big")
	equal(t, "over max_response_bytes", r["error"], any("Ruvoy::UpstreamError"))
	mustContain(t, "message", r["message"].(string), "max_response_bytes")
	r = getJSON(t, client, s.url+"/unlisted")
	equal(t, "unlisted upstream", r["error"], any("ArgumentError"))
	r = getJSON(t, client, s.url+"/undefined")
	equal(t, "undefined upstream", r["error"], any("Ruvoy::UpstreamError"))
	mustContain(t, "the log, after the first call", s.stderr.String(),
		`upstream that is not defined: its calls will fail","upstream":"ghost"`)
}

// A client that leaves during a call: the call is cancelled, not leaked.
func TestExtensionsClientLeavesDuringCall(t *testing.T) {
	s := startExtensions(t)
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := c.Get(s.url + "/leave"); err == nil {
		t.Fatal("the request should have timed out")
	}
	eventually(t, 5*time.Second, "the upstream saw the call cancelled", func() bool { return s.up.cancelled.Load() == 1 })
}

// In cluster mode the calls cross two process boundaries (worker -> front
// end -> upstream and back): many at once, each gets its own answer, and
// a client that leaves cancels its call.
func TestExtensionsUpstreamInWorkers(t *testing.T) {
	s := startExtensionsIn(t, 2)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			r := getJSON(t, client, s.url+"/user?id="+strconv.Itoa(i))
			equal(t, "body", r["body"], any(`{"id":"`+strconv.Itoa(i)+`","accept":"application/json"}`))
		}()
	}
	wg.Wait()
	equal(t, "route_name", getJSON(t, client, s.url+"/context")["route_name"], any("api"))
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := c.Get(s.url + "/leave"); err == nil {
		t.Fatal("the request should have timed out")
	}
	eventually(t, 5*time.Second, "the upstream saw the call cancelled", func() bool { return s.up.cancelled.Load() == 1 })
}

// examples/extensions runs as its README says.
func TestExtensionsExample(t *testing.T) {
	port, usersPort := freePort(t), freePort(t)
	s := launchIn(t, "../examples/extensions", []string{"PORT=" + port, "USERS_PORT=" + usersPort},
		port, "run", "--config", "Caddyfile")
	s.waitReady(t)
	equal(t, "body", s.get(t, "/").body,
		`{"route":"api","tenant":"t-42","plan":"gold","client":"127.0.0.1","user_status":200,"user":{"id":"42","name":"User 42"}}`+"\n")
}
