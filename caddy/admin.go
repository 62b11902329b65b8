package ruvoycaddy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/ruvoy/ruvoy/internal/serve"
)

func init() {
	caddy.RegisterModule(Probes{})
}

// Probes serves readiness and liveness on the admin API:
//
//	GET /ruvoy/ready   200 once an app has booted, 503 before, while draining
//	                   and while no worker serves (cluster mode)
//	GET /ruvoy/health  200 while the VM thread gets back to its event loop,
//	                   503 when Ruby code has held it for StuckAfter
type Probes struct{}

// StuckAfter is how long Ruby code may hold the VM thread before the
// liveness probe fails.
const StuckAfter = 30 * time.Second

// CaddyModule returns the Caddy module information.
func (Probes) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.ruvoy",
		New: func() caddy.Module { return new(Probes) },
	}
}

// Routes returns the probe routes.
func (Probes) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/ruvoy/ready", Handler: caddy.AdminHandlerFunc(readyProbe)},
		{Pattern: "/ruvoy/health", Handler: caddy.AdminHandlerFunc(healthProbe)},
	}
}

func readyProbe(w http.ResponseWriter, r *http.Request) error {
	if ok, why := ready(r); !ok {
		http.Error(w, why, http.StatusServiceUnavailable)
		return nil
	}
	fmt.Fprintln(w, "ready")
	return nil
}

func healthProbe(w http.ResponseWriter, r *http.Request) error {
	if serve.Current() == nil {
		fmt.Fprintln(w, "ok (no VM yet)")
		return nil
	}
	if held := heldFor(); held > StuckAfter {
		http.Error(w, fmt.Sprintf("unhealthy: Ruby code has held the VM thread for %v", held.Round(time.Second)),
			http.StatusServiceUnavailable)
		return nil
	}
	fmt.Fprintln(w, "ok")
	return nil
}

var _ caddy.AdminRouter = Probes{}
