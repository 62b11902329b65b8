package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	caddybrotli "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/brotli"
	caddygzip "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/gzip"
	caddyzstd "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/zstd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddypki"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/caddy/v2/modules/logging"

	ruvoycaddy "github.com/ruvoy/ruvoy/caddy"
)

// staticFS names the file system --static serves from.
const staticFS = "ruvoy_static"

// modules turns Caddy's config values into the JSON their parents hold:
// apps, handlers, matchers and the like are json.RawMessage in Caddy's
// structs. Marshalling these values fails only on a bug; buildConfig
// reports it instead of printing a config with holes.
type modules struct{ warnings []caddyconfig.Warning }

// json is v's JSON.
func (m *modules) json(v any) json.RawMessage { return caddyconfig.JSON(v, &m.warnings) }

// module is v's JSON with the module's name under key, as in
// {"handler": "file_server", ...}.
func (m *modules) module(v any, key, name string) json.RawMessage {
	return caddyconfig.JSONModuleObject(v, key, name, &m.warnings)
}

// buildConfig is the Caddy JSON config `ruvoy config.ru` runs: one server on
// the address given, every request to the ruvoy handler, Caddy's own logs at
// WARN (ruvoy's at INFO), no automatic HTTPS, and the admin API only when
// asked for. It is made of the types Caddy and the ruvoy module read their
// JSON into, so the keys are theirs.
func buildConfig(o *options) ([]byte, error) {
	m := new(modules)
	handler := o.handler // what the flags set of the handler's fields (settings.Table)
	handler.Rackup = o.rackup
	apps := caddy.ModuleMap{}
	if len(o.upstreams) > 0 {
		upstreams := ruvoycaddy.Upstreams{Upstreams: map[string]json.RawMessage{}}
		handler.Upstream = &ruvoycaddy.UpstreamConfig{}
		for _, u := range o.upstreams {
			if _, dup := upstreams.Upstreams[u.Name]; dup {
				return nil, fmt.Errorf("--upstream %s is given twice", u.Name)
			}
			// Round robin over the URLs, as docs/extensions.md says
			// (Caddy's default is random).
			proxy := &reverseproxy.Handler{LoadBalancing: &reverseproxy.LoadBalancing{
				SelectionPolicyRaw: m.module(&reverseproxy.RoundRobinSelection{}, "policy", "round_robin"),
			}}
			for _, h := range u.Hosts {
				proxy.Upstreams = append(proxy.Upstreams, &reverseproxy.Upstream{Dial: h})
			}
			if u.TLS {
				proxy.TransportRaw = m.module(&reverseproxy.HTTPTransport{TLS: &reverseproxy.TLSConfig{}}, "protocol", "http")
			}
			upstreams.Upstreams[u.Name] = m.json(proxy)
			handler.Upstream.Upstreams = append(handler.Upstream.Upstreams, u.Name)
		}
		apps["ruvoy"] = m.json(upstreams)
	}
	var encoders []json.RawMessage
	if o.compress {
		// Caddy's encoder: text types over 512 bytes, zstd or gzip as the
		// client prefers; it flushes with the app, so streams keep streaming.
		encoders = append(encoders, m.module(&encode.Encode{
			EncodingsRaw: caddy.ModuleMap{"zstd": m.json(caddyzstd.Zstd{}), "gzip": m.json(caddygzip.Gzip{})},
			Prefer:       []string{"zstd", "gzip"},
		}, "handler", "encode"))
	}
	routes := caddyhttp.RouteList{{
		HandlersRaw: append(slices.Clone(encoders), m.module(&handler, "handler", "ruvoy")),
	}}
	if o.static != "" {
		// Files that exist are served by Caddy; everything else goes to the
		// app: directories, dotfiles (a path segment starting with "."), and
		// what a symlink out of the directory would reach (the ruvoy_static
		// file system opens files through an os.Root).
		files := caddyhttp.Route{
			MatcherSetsRaw: caddyhttp.RawMatcherSets{{
				"file": m.json(fileserver.MatchFile{FileSystem: staticFS, Root: o.static, TryFiles: []string{"{http.request.uri.path}"}}),
				"not": m.json(caddyhttp.MatchNot{MatcherSetsRaw: []caddy.ModuleMap{
					{"path": m.json(caddyhttp.MatchPath{"*/"})},
					{"path_regexp": m.json(caddyhttp.MatchPathRE{MatchRegexp: caddyhttp.MatchRegexp{Pattern: `/\.`}})},
				}}),
			}},
			HandlersRaw: append(slices.Clone(encoders),
				m.module(&headers.Handler{Response: &headers.RespHeaderOps{HeaderOps: &headers.HeaderOps{Delete: []string{"Server"}}}},
					"handler", "headers"),
				m.module(ruvoycaddy.Sendfile{}, "handler", "ruvoy_sendfile"),
				m.module(&fileserver.FileServer{
					FileSystem:         staticFS,
					Root:               o.static,
					PrecompressedRaw:   caddy.ModuleMap{"br": m.json(caddybrotli.BrotliPrecompressed{}), "gzip": m.json(caddygzip.GzipPrecompressed{})},
					PrecompressedOrder: []string{"br", "gzip"},
				}, "handler", "file_server"),
			),
		}
		routes = append(caddyhttp.RouteList{files}, routes...)
		apps["caddy.filesystems"] = m.json(filesystems{Filesystems: []filesystem{{
			Name: staticFS, FileSystem: m.module(&ruvoycaddy.StaticFS{Root: o.static}, "backend", "ruvoy_static"),
		}}})
	}
	if o.healthPath != "" {
		// First: a balancer's probe is answered whatever else the path is.
		health := caddyhttp.Route{
			MatcherSetsRaw: caddyhttp.RawMatcherSets{{"path": m.json(caddyhttp.MatchPath{o.healthPath})}},
			HandlersRaw:    []json.RawMessage{m.module(ruvoycaddy.Health{}, "handler", "ruvoy_health")},
		}
		routes = append(caddyhttp.RouteList{health}, routes...)
	}
	// h2c is listed even without --h2c, where the HTTP/1 guard refuses
	// HTTP/2's preface (HTTP1Guard.NoH2C): with h1 alone Caddy wraps each
	// connection in one that hides ReadFrom, and Go then sends no file
	// with sendfile(2).
	protocols := []string{"h1", "h2c"}
	server := &caddyhttp.Server{
		Listen:    o.listens(),
		Routes:    routes,
		AutoHTTPS: &caddyhttp.AutoHTTPSConfig{Disabled: true},
		Protocols: protocols,
		// Shutdown only once accepted connections' first request heads
		// are read; connection numbers for env["ruvoy.context"]; refusal
		// of request smuggling shapes on HTTP/1.x (after TLS, when there
		// is TLS: configureTLS).
		ListenerWrappersRaw: []json.RawMessage{
			m.module(&ruvoycaddy.Drain{Delay: caddy.Duration(o.drainDelay)}, "wrapper", "ruvoy_drain"),
			m.module(ruvoycaddy.ConnectionIDs{}, "wrapper", "ruvoy_connection_ids"),
			m.module(ruvoycaddy.HTTP1Guard{NoH2C: !o.h2c}, "wrapper", "ruvoy_http1_guard"),
		},
		// Caddy's read deadlines on request bodies: a body idle for a minute
		// (its default read_idle_timeout), or slower than this on average
		// after that minute, ends with 408 (ruvoy's handler answers it).
		ReadMinRate: int64(o.minUploadRate),
		// A response write (up to Caddy's max_write_chunk, 64 KiB) that
		// does not finish within it cuts the response: a client that takes
		// nothing (an HTTP/2 window left at 0, a socket never read) gives
		// its place in Ruby back. Negative: off.
		WriteIdleTimeout: writeTimeout(o.writeTimeout),
	}
	if o.tls() {
		configureTLS(o, server, apps, m)
	}
	if len(o.trustedProxies) > 0 {
		// Strict: the client is the rightmost X-Forwarded-For entry that is
		// not a trusted proxy; the leftmost is whatever the client wrote.
		server.TrustedProxiesRaw = m.module(caddyhttp.StaticIPRange{Ranges: o.trustedProxies}, "source", "static")
		server.TrustedProxiesStrict = 1
	}
	logs := map[string]*caddy.CustomLog{
		// Caddy's farewell left out: the console says how the stop went.
		"default": {BaseLog: caddy.BaseLog{Level: "WARN", EncoderRaw: m.module(ruvoycaddy.DefaultLog{}, "format", "ruvoy_default")},
			Exclude: []string{"admin", "http.handlers.ruvoy", "http.log.access"}},
		"admin": {BaseLog: caddy.BaseLog{Level: "ERROR"}, Include: []string{"admin"}},
		"ruvoy": {BaseLog: caddy.BaseLog{Level: "INFO"}, Include: []string{"http.handlers.ruvoy"}},
	}
	if o.accessLog {
		server.Logs = &caddyhttp.ServerLogConfig{}
		var format json.RawMessage // Caddy's choice: text on a terminal, JSON otherwise
		switch o.accessLogFormat {
		case "common":
			format = m.module(ruvoycaddy.CommonLog{}, "format", "ruvoy_common")
		case "json":
			format = m.module(&logging.JSONEncoder{}, "format", "json")
		}
		logs["access"] = &caddy.CustomLog{
			BaseLog: caddy.BaseLog{
				Level:     "INFO",
				WriterRaw: m.module(caddy.StdoutWriter{}, "output", "stdout"),
				// Secrets in query strings stay out of the log (caddy/queryfilter.go).
				EncoderRaw: m.module(&logging.FilterEncoder{WrappedRaw: format, FieldsRaw: map[string]json.RawMessage{
					"request>uri": m.module(ruvoycaddy.QueryFilter{Names: o.filterParameters}, "filter", "ruvoy_query"),
				}}, "format", "filter"),
			},
			Include: []string{"http.log.access"},
		}
	}
	persist := false
	admin := &caddy.AdminConfig{Disabled: true, Config: &caddy.ConfigSettings{Persist: &persist}}
	if listen := o.adminListen(); listen != "" {
		// On a unix socket only the server's user may open (admin.go):
		// Caddy's admin API takes no credential.
		admin = &caddy.AdminConfig{Listen: listen, Config: &caddy.ConfigSettings{Persist: &persist}}
	}
	httpApp := &caddyhttp.App{
		GracePeriod: caddy.Duration(o.grace),
		Servers:     map[string]*caddyhttp.Server{"ruvoy": server},
	}
	if o.adminListen() != "" {
		// Request counts and latencies by status (caddy_http_*) beside
		// ruvoy's own, on the admin API's /metrics: only where they can be
		// read, as they cost every request a little.
		httpApp.Metrics = &caddyhttp.Metrics{}
	}
	apps["http"] = m.json(httpApp)
	cfg := &caddy.Config{
		Admin:   admin,
		Logging: &caddy.Logging{Logs: logs},
		AppsRaw: apps,
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	for _, w := range m.warnings {
		err = errors.Join(err, fmt.Errorf("generating the config: %s", w.Message))
	}
	return out, err
}

// filesystems is the app caddy.filesystems, whose own type's entries
// cannot be built outside Caddy (unexported).
type filesystems struct {
	Filesystems []filesystem `json:"filesystems"`
}

type filesystem struct {
	Name       string          `json:"name"`
	FileSystem json.RawMessage `json:"file_system"`
}

// writeTimeout is --write-timeout as Caddy's write_idle_timeout, where
// a negative value turns it off (0 would be Caddy's default, a minute).
func writeTimeout(d time.Duration) caddy.Duration {
	if d == 0 {
		return -1
	}
	return caddy.Duration(d)
}

// configureTLS makes the server speak HTTPS: HTTP/1.1 and HTTP/2 by ALPN,
// and HTTP/3 on the same port, with the certificate the options name.
func configureTLS(o *options, server *caddyhttp.Server, apps caddy.ModuleMap, m *modules) {
	server.Protocols = []string{"h1", "h2", "h3"}
	// TLS goes before the HTTP/1 guard, which then reads the decrypted
	// bytes. Caddy's type for the tls wrapper is unexported; it has no
	// settings.
	wrappers := server.ListenerWrappersRaw
	server.ListenerWrappersRaw = append(slices.Clone(wrappers[:len(wrappers)-1]), json.RawMessage(`{"wrapper": "tls"}`), wrappers[len(wrappers)-1])
	// HTTP/1.0 too: a client that offers only it would otherwise get a
	// handshake alert (no protocol in common), where Puma serves it.
	policy := &caddytls.ConnectionPolicy{ALPN: []string{"h2", "http/1.1", "http/1.0"}}
	if o.tlsClientCA != "" {
		policy.ClientAuthentication = &caddytls.ClientAuthentication{
			Mode:  "verify_if_given",
			CARaw: m.module(caddytls.FileCAPool{TrustedCACertPEMFiles: []string{o.tlsClientCA}}, "provider", "file"),
		}
		// Caddy then wants the TLS server name to match the Host (421
		// otherwise), which requests by IP cannot; with one policy for the
		// whole server there is no other policy to slip past.
		strict := false
		server.StrictSNIHost = &strict
	}
	tls := &caddytls.TLS{}
	switch {
	case o.tlsCert != "":
		tls.CertificatesRaw = caddy.ModuleMap{"load_files": m.json(caddytls.FileLoader{
			{Certificate: o.tlsCert, Key: o.tlsKey, Tags: []string{"ruvoy"}},
		})}
		// Whatever name the client asks for (or none, by IP): this one.
		policy.CertSelection = &caddytls.CustomCertSelectionPolicy{AnyTag: []string{"ruvoy"}}
	case o.tlsInternal:
		names := []string{"localhost", "127.0.0.1", "::1"}
		if o.address != "127.0.0.1" && o.address != "::1" && o.address != "localhost" && o.address != "0.0.0.0" && o.address != "::" {
			names = append(names, o.address)
		}
		tls.CertificatesRaw = caddy.ModuleMap{"automate": m.json(caddytls.AutomateLoader(names))}
		tls.Automation = &caddytls.AutomationConfig{Policies: []*caddytls.AutomationPolicy{{
			SubjectsRaw: names,
			IssuersRaw:  []json.RawMessage{m.module(&caddytls.InternalIssuer{}, "module", "internal")},
		}}}
		// A local CA for development: its root is not put in the system's
		// trust store (Caddy's data directory holds it, pki/authorities/local).
		install := false
		apps["pki"] = m.json(&caddypki.PKI{CAs: map[string]*caddypki.CA{"local": {InstallTrust: &install}}})
		policy.DefaultSNI = "localhost"
	case o.domain != "":
		// Automatic HTTPS: Caddy gets and renews the certificate (ACME) and
		// redirects port 80 to HTTPS.
		server.AutoHTTPS = nil
		host := m.json(caddyhttp.MatchHost{o.domain})
		for i := range server.Routes {
			route := &server.Routes[i]
			if len(route.MatcherSetsRaw) == 0 {
				route.MatcherSetsRaw = caddyhttp.RawMatcherSets{{}}
			}
			for _, set := range route.MatcherSetsRaw {
				set["host"] = host
			}
		}
	}
	server.TLSConnPolicies = caddytls.ConnectionPolicies{policy}
	if tls.CertificatesRaw != nil {
		apps["tls"] = m.json(tls)
	}
}
