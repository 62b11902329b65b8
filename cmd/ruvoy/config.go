package main

import (
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// staticFS names the file system --static serves from.
const staticFS = "ruvoy_static"

// buildConfig is the Caddy JSON config `ruvoy config.ru` runs: one server on
// the address given, every request to the ruvoy handler, Caddy's own logs at
// WARN (ruvoy's at INFO), no automatic HTTPS, and the admin API only when
// asked for.
func buildConfig(o *options) ([]byte, error) {
	handler := map[string]any{"handler": "ruvoy", "rackup": o.rackup, "environment": o.environment}
	if o.maxBodyBytes > 0 {
		handler["max_body_bytes"] = o.maxBodyBytes
	}
	if o.maxRequests > 0 {
		handler["max_requests"] = o.maxRequests
	}
	if o.queueTimeout > 0 {
		handler["queue_timeout"] = fmt.Sprintf("%dms", o.queueTimeout)
	}
	if o.stallWarn >= 0 {
		handler["stall_warn"] = fmt.Sprintf("%dms", o.stallWarn)
	}
	if o.requestTimeout > 0 {
		handler["request_timeout"] = seconds(o.requestTimeout)
	}
	if o.holdLimit > 0 {
		handler["vm_hold_limit"] = seconds(o.holdLimit)
	}
	if o.bodyBudget > 0 {
		handler["max_inflight_body_bytes"] = o.bodyBudget
	}
	if o.workers > 0 {
		handler["workers"] = o.workers
		if o.workerMaxRSS > 0 {
			handler["worker_max_rss_bytes"] = o.workerMaxRSS << 20
		}
	}
	protocols := []string{"h1"}
	if o.h2c {
		protocols = append(protocols, "h2c")
	}
	if len(o.sendfileDirs) > 0 {
		handler["sendfile_dirs"] = o.sendfileDirs
	}
	if o.context {
		handler["context"] = map[string]any{}
	}
	var encode []any
	if o.compress {
		// Caddy's encoder: text types over 512 bytes, zstd or gzip as the
		// client prefers; it flushes with the app, so streams keep streaming.
		encode = []any{map[string]any{
			"handler":   "encode",
			"encodings": map[string]any{"zstd": map[string]any{}, "gzip": map[string]any{}},
			"prefer":    []string{"zstd", "gzip"},
		}}
	}
	routes := []any{map[string]any{"handle": append(encode, handler)}}
	if o.static != "" {
		// Files that exist are served by Caddy; everything else goes to the
		// app: directories, dotfiles (a path segment starting with "."), and
		// what a symlink out of the directory would reach (the ruvoy_static
		// file system opens files through an os.Root).
		files := map[string]any{
			"match": []any{map[string]any{
				"file": map[string]any{"fs": staticFS, "root": o.static, "try_files": []string{"{http.request.uri.path}"}},
				"not": []any{
					map[string]any{"path": []string{"*/"}},
					map[string]any{"path_regexp": map[string]any{"pattern": `/\.`}},
				},
			}},
			"handle": append(append([]any{}, encode...),
				map[string]any{"handler": "headers", "response": map[string]any{"delete": []string{"Server"}}},
				map[string]any{
					"handler":             "file_server",
					"fs":                  staticFS,
					"root":                o.static,
					"precompressed":       map[string]any{"br": map[string]any{}, "gzip": map[string]any{}},
					"precompressed_order": []string{"br", "gzip"},
				},
			),
		}
		routes = append([]any{files}, routes...)
	}
	server := map[string]any{
		"listen":          []string{o.listen()},
		"routes":          routes,
		"automatic_https": map[string]any{"disable": true},
		"protocols":       protocols,
		// Shutdown only once accepted connections' first request heads
		// are read; connection numbers for env["ruvoy.context"]; refusal
		// of request smuggling shapes on cleartext HTTP/1.x (before TLS:
		// TLS passes).
		"listener_wrappers": []any{
			map[string]any{"wrapper": "ruvoy_drain"},
			map[string]any{"wrapper": "ruvoy_connection_ids"},
			map[string]any{"wrapper": "ruvoy_http1_guard"},
		},
	}
	apps := map[string]any{}
	if o.static != "" {
		apps["caddy.filesystems"] = map[string]any{"filesystems": []any{map[string]any{
			"name": staticFS, "file_system": map[string]any{"backend": "ruvoy_static", "root": o.static},
		}}}
	}
	if o.tls() {
		configureTLS(o, server, apps)
	}
	if o.minUploadRate > 0 {
		// Caddy's read deadlines on request bodies: a body idle for a minute
		// (its default read_idle_timeout), or slower than this on average
		// after that minute, ends with 408 (ruvoy's handler answers it).
		server["read_min_rate"] = o.minUploadRate
	}
	if len(o.trustedProxies) > 0 {
		// Strict: the client is the rightmost X-Forwarded-For entry that is
		// not a trusted proxy; the leftmost is whatever the client wrote.
		server["trusted_proxies"] = map[string]any{"source": "static", "ranges": o.trustedProxies}
		server["trusted_proxies_strict"] = 1
	}
	logs := map[string]any{
		"default": map[string]any{"level": "WARN", "exclude": []string{"admin", "http.handlers.ruvoy", "http.log.access"}},
		"admin":   map[string]any{"level": "ERROR", "include": []string{"admin"}},
		"ruvoy":   map[string]any{"level": "INFO", "include": []string{"http.handlers.ruvoy"}},
	}
	if o.accessLog {
		server["logs"] = map[string]any{}
		logs["access"] = map[string]any{
			"level":   "INFO",
			"include": []string{"http.log.access"},
			"writer":  map[string]any{"output": "stdout"},
			// Secrets in query strings stay out of the log (caddy/queryfilter.go).
			"encoder": map[string]any{"format": "filter", "fields": map[string]any{
				"request>uri": map[string]any{"filter": "ruvoy_query", "names": o.filterParameters},
			}},
		}
	}
	admin := map[string]any{"disabled": true, "config": map[string]any{"persist": false}}
	if o.adminPort != "" {
		admin = map[string]any{
			"listen": net.JoinHostPort("127.0.0.1", o.adminPort),
			"config": map[string]any{"persist": false},
		}
	}
	httpApp := map[string]any{
		"grace_period": fmt.Sprintf("%ds", o.grace),
		"servers":      map[string]any{"ruvoy": server},
	}
	if o.adminPort != "" {
		// Request counts and latencies by status (caddy_http_*) beside
		// ruvoy's own, on the admin API's /metrics: only where they can be
		// read, as they cost every request a little.
		httpApp["metrics"] = map[string]any{}
	}
	apps["http"] = httpApp
	if len(o.clusters) > 0 {
		clusters := map[string]any{}
		var names []string
		for _, c := range o.clusters {
			if _, dup := clusters[c.name]; dup {
				return nil, fmt.Errorf("--cluster %s is given twice", c.name)
			}
			var upstreams []any
			for _, h := range c.hosts {
				upstreams = append(upstreams, map[string]any{"dial": h})
			}
			proxy := map[string]any{"upstreams": upstreams}
			if c.tls {
				proxy["transport"] = map[string]any{"protocol": "http", "tls": map[string]any{}}
			}
			clusters[c.name] = proxy
			names = append(names, c.name)
		}
		apps["ruvoy"] = map[string]any{"clusters": clusters}
		handler["upstream"] = map[string]any{"clusters": names}
	}
	cfg := map[string]any{
		"admin":   admin,
		"logging": map[string]any{"logs": logs},
		"apps":    apps,
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// seconds is a duration in Caddy's JSON form.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).String()
}

// configureTLS makes the server speak HTTPS: HTTP/1.1 and HTTP/2 by ALPN,
// and HTTP/3 on the same port, with the certificate the options name.
func configureTLS(o *options, server, apps map[string]any) {
	server["protocols"] = []string{"h1", "h2", "h3"}
	server["listener_wrappers"] = append(server["listener_wrappers"].([]any), map[string]any{"wrapper": "tls"})
	policy := map[string]any{}
	if o.tlsClientCA != "" {
		policy["client_authentication"] = map[string]any{
			"mode": "verify_if_given",
			"ca":   map[string]any{"provider": "file", "pem_files": []string{o.tlsClientCA}},
		}
		// Caddy then wants the TLS server name to match the Host (421
		// otherwise), which requests by IP cannot; with one policy for the
		// whole server there is no other policy to slip past.
		server["strict_sni_host"] = false
	}
	tls := map[string]any{}
	switch {
	case o.tlsCert != "":
		tls["certificates"] = map[string]any{"load_files": []any{
			map[string]any{"certificate": o.tlsCert, "key": o.tlsKey, "tags": []string{"ruvoy"}},
		}}
		// Whatever name the client asks for (or none, by IP): this one.
		policy["certificate_selection"] = map[string]any{"any_tag": []string{"ruvoy"}}
	case o.tlsInternal:
		names := []string{"localhost", "127.0.0.1"}
		if o.address != "127.0.0.1" && o.address != "localhost" && o.address != "0.0.0.0" && o.address != "::" {
			names = append(names, o.address)
		}
		tls["certificates"] = map[string]any{"automate": names}
		tls["automation"] = map[string]any{"policies": []any{map[string]any{
			"subjects": names, "issuers": []any{map[string]any{"module": "internal"}},
		}}}
		// A local CA for development: its root is not put in the system's
		// trust store (Caddy's data directory holds it, pki/authorities/local).
		apps["pki"] = map[string]any{"certificate_authorities": map[string]any{"local": map[string]any{"install_trust": false}}}
		policy["default_sni"] = "localhost"
	case o.domain != "":
		// Automatic HTTPS: Caddy gets and renews the certificate (ACME) and
		// redirects port 80 to HTTPS.
		server["automatic_https"] = map[string]any{}
		routes := server["routes"].([]any)
		for i, r := range routes {
			route := r.(map[string]any)
			matchers, _ := route["match"].([]any)
			if len(matchers) == 0 {
				matchers = []any{map[string]any{}}
			}
			for _, m := range matchers {
				m.(map[string]any)["host"] = []string{o.domain}
			}
			route["match"] = matchers
			routes[i] = route
		}
	}
	server["tls_connection_policies"] = []any{policy}
	if len(tls) > 0 {
		apps["tls"] = tls
	}
}
