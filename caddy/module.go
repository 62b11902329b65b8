// Package ruvoycaddy is the Caddy module http.handlers.ruvoy: it serves
// requests with a Rack app running in the process's embedded Ruby VM.
//
// Build a Caddy with it: xcaddy build --with github.com/ruvoy/ruvoy/caddy
// (with CGO_CFLAGS and CGO_LDFLAGS from build/rbconfig.sh).
package ruvoycaddy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/metrics"
	"github.com/ruvoy/ruvoy/internal/serve"
	"github.com/ruvoy/ruvoy/internal/settings"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler runs a Rack app. Its JSON:
//
//	{"handler": "ruvoy", "rackup": "/srv/app/config.ru", "environment": "production"}
//
// The VM is one per process: the first handler provisioned boots it, and a
// config reload builds the app again in the same VM (see docs).
//
// Each field a user sets is a setting of internal/settings' table, which
// makes its Caddyfile key (the same name), and its flag where it has one;
// a name it had before is read through settings.Renames.
type Handler struct {
	// Rackup is the path to the app's config.ru (default: ./config.ru).
	Rackup string `json:"rackup,omitempty"`
	// Environment sets RACK_ENV before the app loads (default: unchanged).
	Environment string `json:"environment,omitempty"`
	// MaxRequests bounds the requests admitted to Ruby at once (default 1024).
	MaxRequests int `json:"max_requests,omitempty"`
	// MaxRequestsPerConn bounds the requests one HTTP/2 or HTTP/3
	// connection has in Ruby at once; more wait for one of them to end
	// (default 100, or a quarter of MaxRequests when that is less). The
	// server advertises it as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS.
	MaxRequestsPerConn int `json:"max_requests_per_connection,omitempty"`
	// MaxRequestsPerClient bounds the requests one client address (an
	// IPv6 one by its /64) has in Ruby at once, across its connections and
	// protocols; the address is the server's client IP, which honours
	// trusted_proxies. Over it a request is refused, or waits QueueTimeout,
	// as one over MaxRequests (default: a quarter of MaxRequests, at least
	// 64; MaxRequests or more: no bound).
	MaxRequestsPerClient int `json:"max_requests_per_client,omitempty"`
	// QueueTimeout is how long a request over MaxRequests may wait for a
	// place before it gets 503 (default 0: at once).
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`
	// MaxInflightBodyBytes bounds the request body bytes held in memory
	// across requests (default 64 MiB; -1: no limit): a request that would
	// pass it gets 503 before its body is read.
	MaxInflightBodyBytes int64 `json:"max_inflight_body_bytes,omitempty"`
	// MaxBodyBytes bounds request bodies: larger ones get 413 (default: none).
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// RequestTimeout bounds the time a request spends in Ruby: past it,
	// Ruvoy::RequestTimeout is raised in its fiber and the client gets 503
	// (default: none).
	RequestTimeout caddy.Duration `json:"request_timeout,omitempty"`
	// HoldWarn is how long Ruby code may hold the VM thread before a
	// warning names the request and its backtrace (default 100ms; 0: off).
	// The VM is one per process: the last config loaded sets it.
	HoldWarn *caddy.Duration `json:"hold_warn,omitempty"`
	// VMHoldLimit is how long Ruby code may hold the VM thread before the
	// process exits (status 4), so that a supervisor starts a fresh one
	// (default 0: never). Process-wide, like HoldWarn.
	VMHoldLimit *caddy.Duration `json:"vm_hold_limit,omitempty"`
	// GCWhenIdle, when set, runs Ruby's GC between requests: once no
	// request has been in flight for this long, the minor collection Ruby
	// would run in the next request (default 0: off; docs/cli.md). In one
	// process the last app loaded sets it; in cluster mode each app's
	// workers take their own.
	GCWhenIdle caddy.Duration `json:"gc_when_idle,omitempty"`
	// RequestWindow bounds the request body bytes read ahead of the app
	// (default 256 KiB); the rest waits in the kernel.
	RequestWindow int64 `json:"request_window,omitempty"`
	// ResponseWindow bounds the response bytes in flight to a client
	// (default 256 KiB); a producer ahead by that much waits.
	ResponseWindow int64 `json:"response_window,omitempty"`
	// Workers, when above 0, runs the app in that many worker processes
	// (cluster mode): each has its own VM, and a new request goes to the
	// one with the fewest requests in flight. A config reload starts new
	// workers with the app's code as it is now, and stops the old ones
	// once their requests end. HoldWarn and VMHoldLimit apply to each.
	Workers int `json:"workers,omitempty"`
	// WorkerMaxRSSBytes replaces a worker whose resident memory grows
	// past it, once its requests end (default 0: never).
	WorkerMaxRSSBytes int64 `json:"worker_max_rss_bytes,omitempty"`
	// WorkerTimeout is how long a worker may go without reporting (it
	// does every 500 ms, whatever its app does) before it is taken for
	// stopped or frozen: it is killed, its requests get 504, and a new
	// one takes its place (default 30s).
	WorkerTimeout caddy.Duration `json:"worker_timeout,omitempty"`
	// Preload boots the app once, in a template process, and forks the
	// workers from it: they share the booted app's memory until they write
	// it. The app must be fork-safe (connections and threads made at boot
	// are not the workers'). With Workers only.
	Preload bool `json:"preload,omitempty"`

	// SendfileDirs are the directories whose files an X-Sendfile or
	// X-Accel-Redirect response header may name (Rails'
	// x_sendfile_header); Go then sends the file. Empty: the headers pass.
	SendfileDirs []string `json:"sendfile_dirs,omitempty"`
	// EarlyHintsHTTP1 sends the app's 103 Early Hints
	// (env["rack.early_hints"]) to HTTP/1.1 clients too; by default only
	// HTTP/2 and HTTP/3 clients get them.
	EarlyHintsHTTP1 bool `json:"early_hints_http1,omitempty"`
	// Context gives the app env["ruvoy.context"] (off when absent).
	Context *ContextConfig `json:"context,omitempty"`
	// Upstream gives the app env["ruvoy.upstream"] (off when absent).
	Upstream *UpstreamConfig `json:"upstream,omitempty"`

	app     *serve.App
	renamed []string // warnings of former names the JSON used, for Provision to log
}

// UnmarshalJSON reads the handler's JSON strictly, as Caddy reads a
// module's, once what it gives under a former name (settings.Renames) is
// moved to the new one.
func (h *Handler) UnmarshalJSON(b []byte) error {
	b, renamed, err := settings.RenameJSON(settings.InHandlerJSON, b)
	if err != nil {
		return err
	}
	type fields Handler // the same, without this method
	if err := caddy.StrictUnmarshalJSON(b, (*fields)(h)); err != nil {
		return err
	}
	h.renamed = renamed
	return nil
}

// ContextConfig configures env["ruvoy.context"].
type ContextConfig struct {
	// MetadataNamespaces are the namespaces of Caddy vars (set by handlers
	// ahead of ruvoy, e.g. vars) and route metadata the app sees: a var
	// named "acme.tenant.id" lands in dynamic_metadata as
	// {"acme.tenant" => {"id" => ...}}.
	MetadataNamespaces []string `json:"metadata_namespaces,omitempty"`
	// RouteName names the route this handler serves (context.route_name).
	RouteName string `json:"route_name,omitempty"`
	// RouteMetadata is static metadata for the route, by namespace; only
	// the listed namespaces reach the app.
	RouteMetadata map[string]map[string]any `json:"route_metadata,omitempty"`
}

// UpstreamConfig configures env["ruvoy.upstream"].
type UpstreamConfig struct {
	// Upstreams the app may call; they are defined in the "ruvoy" app.
	Upstreams []string `json:"upstreams,omitempty"`
	// TimeoutMS bounds every call (default 15000); a call's own timeout
	// may be shorter.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MaxResponseBytes bounds an answer, which is buffered whole (default
	// 1 MiB); larger ones raise Ruvoy::UpstreamError.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.ruvoy",
		New: func() caddy.Module { return new(Handler) },
	}
}

var registerExit sync.Once

// Provision boots the VM if this is the first handler, and loads the app.
func (h *Handler) Provision(ctx caddy.Context) error {
	if h.Rackup == "" {
		h.Rackup = "config.ru"
	}
	for i, dir := range h.SendfileDirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		h.SendfileDirs[i] = abs
	}
	for name, v := range map[string]int64{"request_window": h.RequestWindow, "response_window": h.ResponseWindow} {
		if v < 0 || v > 1<<30 {
			return fmt.Errorf("ruvoy: %s must be from 1 byte to 1 GiB, got %d", name, v)
		}
	}
	rackup, err := filepath.Abs(h.Rackup)
	if err != nil {
		return err
	}
	if _, err := os.Stat(rackup); err != nil {
		return fmt.Errorf("ruvoy: no rackup at %s", rackup)
	}
	hookServer(ctx)
	rt := serve.Start(serve.Options{Logger: ctx.Logger()})
	rt.SetLogger(ctx.Logger())
	for _, w := range h.renamed {
		ctx.Logger().Warn("ruvoy: " + w)
	}
	if h.HoldWarn != nil {
		rt.VM().SetHoldWarn(time.Duration(*h.HoldWarn))
	}
	if h.VMHoldLimit != nil {
		rt.VM().SetHoldLimit(time.Duration(*h.VMHoldLimit))
	}
	if err := ctx.GetMetricsRegistry().Register(metrics.Collector(rt)); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return fmt.Errorf("ruvoy: registering metrics: %w", err)
		}
	}
	registerExit.Do(func() {
		// The process is exiting: the servers have drained; clean the VM up
		// so at_exit hooks run before Caddy exits, and exit with a status
		// that says when the stop cut requests short.
		caddy.OnExit(func(context.Context) {
			code := rt.Shutdown()
			rt.Stopped(code)
			if code != 0 {
				os.Exit(code)
			}
		})
	})
	if err := settings.Unmet(h, false); err != nil { // preload without workers
		return fmt.Errorf("ruvoy: %w", err)
	}
	opts := serve.AppOptions{
		MaxRequests:              h.MaxRequests,
		MaxRequestsPerConnection: h.MaxRequestsPerConn,
		MaxRequestsPerClient:     h.MaxRequestsPerClient,
		QueueTimeout:             time.Duration(h.QueueTimeout),
		MaxInflightBodyBytes:     h.MaxInflightBodyBytes,
		MaxBodyBytes:             h.MaxBodyBytes,
		RequestTimeout:           time.Duration(h.RequestTimeout),
		RequestWindow:            h.RequestWindow,
		ResponseWindow:           h.ResponseWindow,
		ClientIP:                 clientIP,
		ScriptName:               scriptName,
		RemoteUser:               remoteUser,
		Trusted:                  trustedProxy,
		SendfileDirs:             h.SendfileDirs,
		Workers:                  h.Workers,
		WorkerMaxRSS:             h.WorkerMaxRSSBytes,
		WorkerTimeout:            time.Duration(h.WorkerTimeout),
		Preload:                  h.Preload,
		WriteTimeout:             serverWriteTimeout(ctx),
		WriteChunk:               serverWriteChunk(ctx),
		AccessLog:                accessLog,
		EarlyHintsHTTP1:          h.EarlyHintsHTTP1,
		GCWhenIdle:               time.Duration(h.GCWhenIdle),
	}
	if err := h.extensions(ctx, &opts); err != nil {
		return err
	}
	app, err := rt.Load(rackup, h.Environment, opts)
	if err != nil {
		return err
	}
	h.app = app
	noteStreams(ctx, app.RequestsPerConnection())
	ctx.Logger().Debug("app loaded", zap.String("rackup", rackup))
	return nil
}

// serverWriteTimeout is the write timeout of the server ctx provisions a
// handler in: its write_idle_timeout, which Caddy sets to a minute when
// unset (after the handlers are provisioned) and turns off when negative.
func serverWriteTimeout(ctx caddy.Context) time.Duration {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return 0
	}
	switch t := time.Duration(srv.WriteIdleTimeout); {
	case t < 0:
		return 0
	case t == 0:
		return time.Minute
	default:
		return t
	}
}

// serverWriteChunk is the size of the pieces the write timeout's writer
// cuts a copy into, in the server ctx provisions a handler in (Caddy's
// max_write_chunk, 64 KiB unless set), or 0 where the write timeout is
// off and nothing cuts.
func serverWriteChunk(ctx caddy.Context) int64 {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil || srv.WriteIdleTimeout < 0 {
		return 0
	}
	if srv.MaxWriteChunk > 0 {
		return int64(srv.MaxWriteChunk)
	}
	return caddyhttp.DefaultMaxWriteChunk
}

// extensions turns on env["ruvoy.context"] and env["ruvoy.upstream"] as
// configured.
func (h *Handler) extensions(ctx caddy.Context, o *serve.AppOptions) error {
	if c := h.Context; c != nil {
		route := map[string]any{}
		for _, ns := range c.MetadataNamespaces {
			if values, ok := c.RouteMetadata[ns]; ok {
				route[ns] = values
			}
		}
		o.Context = &serve.ContextOptions{
			RouteName:       c.RouteName,
			RouteMetadata:   route,
			DynamicMetadata: dynamicMetadata(c.MetadataNamespaces),
			ConnectionID:    connectionID,
		}
	}
	if u := h.Upstream; u != nil && len(u.Upstreams) > 0 {
		for _, name := range u.Upstreams {
			if name == "" || strings.ContainsAny(name, ", ") {
				return fmt.Errorf("ruvoy: upstream name %q: no commas or spaces", name)
			}
		}
		o.Upstream = &serve.UpstreamOptions{
			Names:            u.Upstreams,
			Timeout:          time.Duration(u.TimeoutMS) * time.Millisecond,
			MaxResponseBytes: u.MaxResponseBytes,
			Caller:           &upstreamsRef{ctx: ctx, wanted: u.Upstreams},
		}
	}
	return nil
}

// dynamicMetadata collects the Caddy vars in the given namespaces: a var
// "ns.key" becomes {"ns" => {"key" => value}}, a var "ns" holding a map is
// taken whole. Values JSON cannot carry are left out.
func dynamicMetadata(namespaces []string) func(*http.Request) map[string]any {
	if len(namespaces) == 0 {
		return nil
	}
	return func(r *http.Request) map[string]any {
		vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
		out := map[string]any{}
		for _, ns := range namespaces {
			values := map[string]any{}
			if whole, ok := vars[ns].(map[string]any); ok {
				for k, v := range whole {
					if plain, ok := plainValue(v); ok {
						values[k] = plain
					}
				}
			}
			for k, v := range vars {
				if key, ok := strings.CutPrefix(k, ns+"."); ok && key != "" {
					if plain, ok := plainValue(v); ok {
						values[key] = plain
					}
				}
			}
			if len(values) > 0 {
				out[ns] = values
			}
		}
		return out
	}
}

// plainValue keeps what JSON (and so Ruby) can hold: strings, numbers,
// booleans, nil, and lists and maps of those.
func plainValue(v any) (any, bool) {
	switch t := v.(type) {
	case nil, string, bool, int, int64, uint64, float64, json.Number:
		return t, true
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			if p, ok := plainValue(e); ok {
				out = append(out, p)
			}
		}
		return out, true
	case []string:
		return t, true
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if p, ok := plainValue(e); ok {
				out[k] = p
			}
		}
		return out, true
	case fmt.Stringer:
		return t.String(), true
	}
	return nil, false
}

// Cleanup drops the app when its config is unloaded (a reload or exit).
func (h *Handler) Cleanup() error {
	if h.app != nil {
		h.app.Close()
	}
	return nil
}

// ServeHTTP answers the request from the app; it never calls next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.app.ServeHTTP(w, r)
	// The access log shows the request as it arrived: the X-Request-Id the
	// app saw (perhaps made for it) goes in a field of its own, when the
	// server keeps an access log at all.
	if srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); srv == nil || srv.Logs == nil {
		return nil
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		if id := r.Header["X-Request-Id"]; len(id) == 1 {
			extra.Add(zap.String("request_id", id[0]))
		}
	}
	return nil
}

// trustedProxy reports whether Caddy found the request's peer among the
// server's trusted_proxies.
func trustedProxy(r *http.Request) bool {
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted
}

func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip
}

// scriptName is the part of the path a rewrite in front of the handler
// stripped (handle_path, uri strip_prefix): where the app is mounted. A
// rewrite that replaced the path, rather than cut a prefix, mounts nothing.
func scriptName(r *http.Request) string {
	orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if !ok || orig.URL == nil {
		return ""
	}
	full, rest := orig.URL.EscapedPath(), r.URL.EscapedPath()
	if full == rest || !strings.HasPrefix(rest, "/") {
		return ""
	}
	if rest == "/" && !strings.HasSuffix(full, "/") {
		return full // handle_path /app* asked for /app
	}
	if !strings.HasSuffix(full, rest) {
		return ""
	}
	return full[:len(full)-len(rest)]
}

// accessLog adds a field to r's access log entry: the worker that serves
// it, its queue time.
func accessLog(r *http.Request, f zap.Field) {
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(f)
	}
}

// remoteUser is the user Caddy's authentication (basic_auth) let in.
func remoteUser(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	user, _ := repl.GetString("http.auth.user.id")
	return user
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
