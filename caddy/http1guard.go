package ruvoycaddy

import (
	"net"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/h1guard"
)

func init() {
	caddy.RegisterModule(HTTP1Guard{})
}

// HTTP1Guard is the listener wrapper caddy.listeners.ruvoy_http1_guard: it
// refuses, with 400 and a closed connection, the cleartext HTTP/1.x
// requests whose framing a proxy in front could read differently (request
// smuggling): Transfer-Encoding with Content-Length, Transfer-Encoding on
// HTTP/1.0, any Transfer-Encoding but a single "chunked", headers folded
// onto continuation lines (obs-fold), Content-Length values that are not
// one number, and chunked bodies that are not framed exactly as RFC 9112
// says. Go's HTTP server accepts some of these by itself. The guard is
// internal/h1guard's; this is its place in Caddy's config.
//
// Placed after the tls wrapper (listener_wrappers { ... tls
// ruvoy_http1_guard }), it reads the decrypted bytes of HTTPS connections
// too, and holds them to the same rules: a connection whose client chose
// HTTP/2 by ALPN passes; any other must speak HTTP/1. Placed before tls,
// it sees TLS connections' handshakes and lets them pass unguarded (it
// says so in the log once).
type HTTP1Guard struct {
	// NoH2C closes, with a 400, a connection that opens with HTTP/2's
	// preface. ruvoy's own config sets it when cleartext HTTP/2 is off: it
	// lists h2c among the server's protocols all the same, since with h1
	// alone Caddy wraps each connection in one that hides ReadFrom, and Go
	// then sends no file with sendfile(2).
	NoH2C bool `json:"no_h2c,omitempty"`

	logger         *zap.Logger
	maxHeaderBytes int // the server's (its max_header_size), read at Provision
}

// CaddyModule returns the Caddy module information.
func (HTTP1Guard) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.ruvoy_http1_guard",
		New: func() caddy.Module { return new(HTTP1Guard) },
	}
}

// Provision records the guard for the handler's check (warnMissingWrappers)
// and reads the server's header limit, which Caddy has set by then.
func (g *HTTP1Guard) Provision(ctx caddy.Context) error {
	noteWrapper(ctx, "ruvoy_http1_guard")
	g.logger = ctx.Logger()
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		g.maxHeaderBytes = srv.MaxHeaderBytes
	}
	return nil
}

// UnmarshalCaddyfile reads the wrapper's name; it takes no options
// (servers { listener_wrappers { ruvoy_http1_guard tls } }).
func (*HTTP1Guard) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// WrapListener guards each accepted connection.
func (g HTTP1Guard) WrapListener(l net.Listener) net.Listener {
	return h1guard.NewListener(l, h1guard.Config{
		NoH2C:          g.NoH2C,
		MaxHeaderBytes: g.maxHeaderBytes,
		BeforeTLS:      g.warnBeforeTLS,
	})
}

// warnBeforeTLS says that HTTPS requests pass unguarded (the guard says it
// once per listener).
func (g HTTP1Guard) warnBeforeTLS() {
	if g.logger == nil {
		return
	}
	g.logger.Warn("ruvoy_http1_guard is placed before tls: HTTPS requests reach Go's parser unguarded (request smuggling shapes); place it after tls",
		zap.String("listener_wrappers", "ruvoy_drain ruvoy_connection_ids tls ruvoy_http1_guard"))
}

var (
	_ caddy.ListenerWrapper = HTTP1Guard{}
	_ caddy.Provisioner     = (*HTTP1Guard)(nil)
	_ caddyfile.Unmarshaler = (*HTTP1Guard)(nil)
)
