package ruvoycaddy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ruvoy/ruvoy/internal/serve"
)

func init() {
	caddy.RegisterModule(Health{})
	httpcaddyfile.RegisterHandlerDirective("ruvoy_health", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		var hl Health
		return hl, hl.UnmarshalCaddyfile(h.Dispenser)
	})
	// Before redirects and rewrites: a balancer's probe gets the host's
	// state, whatever the site does with the path.
	httpcaddyfile.RegisterDirectiveOrder("ruvoy_health", httpcaddyfile.Before, "redir")
}

// Health is the handler http.handlers.ruvoy_health: a load balancer's
// health check on the serving port (--health-path), answered from Go
// without Ruby. It says whether this host should get requests:
//
//	200 ok         serving
//	503 not ready  no app has booted yet; in cluster mode, no worker
//	               serves (all restarting, stopped or frozen)
//	503 draining   the server is stopping (SIGTERM): --drain-delay, then
//	               the grace period
//	503 unhealthy  Ruby code has held the VM thread for StuckAfter
//
// The admin API's /ruvoy/ready and /ruvoy/health say the same on loopback
// (Probes), which a balancer on another host cannot reach.
type Health struct{}

// CaddyModule returns the Caddy module information.
func (Health) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.ruvoy_health",
		New: func() caddy.Module { return new(Health) },
	}
}

// UnmarshalCaddyfile reads `ruvoy_health [matcher]`; it takes no options.
func (Health) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() || d.NextBlock(0) {
		return d.Err("ruvoy_health takes no options (give the path as a matcher: ruvoy_health /up)")
	}
	return nil
}

// ServeHTTP answers the probe; it never passes the request on.
func (Health) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	status, text := http.StatusOK, "ok\n"
	if ok, why := ready(r); !ok {
		status, text = http.StatusServiceUnavailable, why+"\n"
	} else if held := heldFor(); held > StuckAfter {
		status, text = http.StatusServiceUnavailable,
			fmt.Sprintf("unhealthy: Ruby code has held the VM thread for %v\n", held.Round(time.Second))
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(text))
	}
	return nil
}

// ready says whether the host takes requests, and why not. A request on
// a server whose Caddy shutdown_delay runs (http.shutting_down) counts as
// draining too.
func ready(r *http.Request) (bool, string) {
	if rt := serve.Current(); rt == nil || !rt.Serving() {
		return false, "not ready: no app has booted, or no worker serves"
	}
	if caddy.Exiting() {
		return false, "draining: the server is stopping"
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		if v, _ := repl.Get("http.shutting_down"); v == true {
			return false, "draining: the server is stopping"
		}
	}
	return true, ""
}

// heldFor is how long Ruby code has held the VM thread without yielding
// (0: none, or no VM yet).
func heldFor() time.Duration {
	if rt := serve.Current(); rt != nil {
		return rt.Stats().HeldFor
	}
	return 0
}

var (
	_ caddyhttp.MiddlewareHandler = Health{}
	_ caddyfile.Unmarshaler       = Health{}
)
