package ruvoycaddy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/ruvoy/ruvoy/internal/serve"
	"github.com/ruvoy/ruvoy/internal/settings"
)

func init() {
	caddy.RegisterModule(Upstreams{})
}

// Upstreams is the Caddy app "ruvoy": the named upstreams apps may call
// through env["ruvoy.upstream"]. Each is a reverse_proxy handler config
// (without "handler"), so Caddy's connection pools, TLS to the upstream,
// load balancing, health checks and retries apply:
//
//	{"apps": {"ruvoy": {"upstreams": {
//	  "users": {"upstreams": [{"dial": "10.0.0.7:8080"}, {"dial": "10.0.0.8:8080"}],
//	            "health_checks": {"active": {"uri": "/health"}}}
//	}}}}
type Upstreams struct {
	Upstreams map[string]json.RawMessage `json:"upstreams,omitempty"`

	handlers map[string]*reverseproxy.Handler
	renamed  []string // warnings of former names the JSON used, for Provision to log
}

// UnmarshalJSON reads the app's JSON strictly, once what it gives under a
// former name (settings.Renames) is moved to the new one.
func (c *Upstreams) UnmarshalJSON(b []byte) error {
	b, renamed, err := settings.RenameJSON(settings.InAppJSON, b)
	if err != nil {
		return err
	}
	type fields Upstreams // the same, without this method
	if err := caddy.StrictUnmarshalJSON(b, (*fields)(c)); err != nil {
		return err
	}
	c.renamed = renamed
	return nil
}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "ruvoy",
		New: func() caddy.Module { return new(Upstreams) },
	}
}

// Provision loads every upstream's reverse proxy.
func (c *Upstreams) Provision(ctx caddy.Context) error {
	c.handlers = map[string]*reverseproxy.Handler{}
	for _, w := range c.renamed {
		ctx.Logger().Warn("ruvoy: " + w)
	}
	for name, raw := range c.Upstreams {
		if name == "" || strings.ContainsAny(name, ", ") {
			return fmt.Errorf("ruvoy: upstream name %q: no commas or spaces", name)
		}
		mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
		if err != nil {
			return fmt.Errorf("ruvoy: upstream %s: %w", name, err)
		}
		c.handlers[name] = mod.(*reverseproxy.Handler)
	}
	return nil
}

// Start is part of caddy.App; the proxies need no starting.
func (c *Upstreams) Start() error { return nil }

// Stop is part of caddy.App.
func (c *Upstreams) Stop() error { return nil }

// Call sends one call through the upstream's reverse proxy and buffers
// the answer (serve.UpstreamCaller).
func (c *Upstreams) Call(ctx context.Context, call *serve.UpstreamCall, maxBytes int64) (*serve.UpstreamResponse, error) {
	h := c.handlers[call.Upstream]
	if h == nil {
		return nil, &serve.UpstreamError{Msg: fmt.Sprintf("no upstream named %q is defined", call.Upstream)}
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, "http://"+call.Upstream+call.Path, bytes.NewReader(call.Body))
	if err != nil {
		return nil, &serve.UpstreamError{Msg: err.Error()}
	}
	req.Header = call.Header
	req.Host = call.Upstream
	req.RemoteAddr = "127.0.0.1:0" // the app is the client
	rec := &buffered{max: maxBytes, header: http.Header{}}
	server, _ := call.Origin.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if server == nil {
		server = new(caddyhttp.Server)
	}
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), rec, server)
	err = runProxy(h, rec, req)
	if rec.tooLarge {
		return nil, &serve.UpstreamError{Msg: fmt.Sprintf("the answer from %s is larger than max_response_bytes (%d)", call.Upstream, maxBytes)}
	}
	if err != nil {
		var he caddyhttp.HandlerError
		switch {
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
			return nil, context.DeadlineExceeded
		case errors.As(err, &he) && he.Err != nil && strings.Contains(he.Err.Error(), "no upstreams available"):
			return nil, &serve.UpstreamError{Msg: fmt.Sprintf("no healthy host in upstream %s", call.Upstream)}
		case errors.As(err, &he) && he.StatusCode == http.StatusGatewayTimeout:
			return nil, context.DeadlineExceeded
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default: // could not reach it, or it hung up
			return &serve.UpstreamResponse{Status: http.StatusServiceUnavailable, Header: http.Header{}}, nil
		}
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	return &serve.UpstreamResponse{Status: status, Header: rec.header, Body: rec.body.Bytes()}, nil
}

// runProxy runs the proxy; the proxy aborts a response whose body it cannot
// finish copying by panicking with http.ErrAbortHandler, as to a client.
func runProxy(h *reverseproxy.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			err = errAborted
		}
	}()
	return h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
}

var errAborted = errors.New("ruvoy: the upstream answer was cut short")

// buffered is the ResponseWriter a call's answer is collected in.
type buffered struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	max      int64
	tooLarge bool
}

func (b *buffered) Header() http.Header { return b.header }

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 && status >= 200 {
		b.status = status
	}
}

var errTooLarge = errors.New("ruvoy: upstream answer over max_response_bytes")

func (b *buffered) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if int64(b.body.Len()+len(p)) > b.max {
		b.tooLarge = true
		return 0, errTooLarge
	}
	return b.body.Write(p)
}

func (b *buffered) Flush() {}

var (
	_ caddy.App            = (*Upstreams)(nil)
	_ caddy.Provisioner    = (*Upstreams)(nil)
	_ serve.UpstreamCaller = (*Upstreams)(nil)
)
