// Package ruvoycaddy is the Caddy module http.handlers.ruvoy: it serves
// requests with a Rack app running in the process's embedded Ruby VM.
//
// Build a Caddy with it: xcaddy build --with github.com/ruvoy/ruvoy/caddy
// (with CGO_CFLAGS and CGO_LDFLAGS from build/rbconfig.sh).
package ruvoycaddy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy"
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
type Handler struct {
	// Rackup is the path to the app's config.ru (default: ./config.ru).
	Rackup string `json:"rackup,omitempty"`
	// Environment sets RACK_ENV before the app loads (default: unchanged).
	Environment string `json:"environment,omitempty"`
	// MaxRequests bounds the requests admitted to Ruby at once (default 1024).
	MaxRequests int `json:"max_requests,omitempty"`
	// QueueTimeout is how long a request over MaxRequests may wait for a
	// place before it gets 503 (default 0: at once).
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`
	// MaxInflightBodyBytes bounds the request body bytes held in memory
	// across requests (default 64 MiB; -1: no limit): a request that would
	// pass it gets 503 before its body is read.
	MaxInflightBodyBytes int64 `json:"max_inflight_body_bytes,omitempty"`
	// MaxBodyBytes bounds request bodies: larger ones get 413 (default: none).
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// StallWarn is how long Ruby code may hold the VM thread before a
	// warning names the request and its backtrace (default 100ms; 0: off).
	// The VM is one per process: the last config loaded sets it.
	StallWarn *caddy.Duration `json:"stall_warn,omitempty"`
	// RequestWindow bounds the request body bytes read ahead of the app
	// (default 256 KiB); the rest waits in the kernel.
	RequestWindow int64 `json:"request_window,omitempty"`
	// ResponseWindow bounds the response bytes in flight to a client
	// (default 256 KiB); a producer ahead by that much waits.
	ResponseWindow int64 `json:"response_window,omitempty"`

	app *ruvoy.App
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
	rt, err := ruvoy.Start(ruvoy.Options{Logger: ctx.Logger()})
	if err != nil {
		return fmt.Errorf("ruvoy: starting Ruby: %w", err)
	}
	rt.SetLogger(ctx.Logger())
	if h.StallWarn != nil {
		rt.SetStallWarn(time.Duration(*h.StallWarn))
	}
	if err := ctx.GetMetricsRegistry().Register(rt.Collector()); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return fmt.Errorf("ruvoy: registering metrics: %w", err)
		}
	}
	registerExit.Do(func() {
		// The process is exiting: the servers have drained; clean the VM up
		// so at_exit hooks run before Caddy exits.
		caddy.OnExit(func(context.Context) { rt.Shutdown() })
	})
	app, err := rt.Load(rackup, h.Environment, ruvoy.AppOptions{
		MaxRequests:          h.MaxRequests,
		QueueTimeout:         time.Duration(h.QueueTimeout),
		MaxInflightBodyBytes: h.MaxInflightBodyBytes,
		MaxBodyBytes:         h.MaxBodyBytes,
		RequestWindow:        h.RequestWindow,
		ResponseWindow:       h.ResponseWindow,
		ClientIP:             clientIP,
	})
	if err != nil {
		return err
	}
	h.app = app
	ctx.Logger().Debug("app loaded", zap.String("rackup", rackup))
	return nil
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
	return nil
}

func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
