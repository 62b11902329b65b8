package ruvoycaddy

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// hooked holds the Caddy servers whose Go server a ruvoy handler has set
// up, once each.
var hooked sync.Map // *caddyhttp.Server -> struct{}

// hookServer sets up the Go HTTP server under the Caddy server that ctx
// provisions a handler in: every connection's context holds the
// connection (serve.WithConn: the handler tells a client that left from
// one that half-closed by it), `OPTIONS *` reaches the app (Go answers
// it itself unless DisableGeneralOptionsHandler is set, and Caddy has no
// option for it), and HTTP/2 advertises the places a connection may hold
// in Ruby as its SETTINGS_MAX_CONCURRENT_STREAMS (noteStreams; Caddy has
// no option for it either), so that a client opens another connection
// rather than queue streams. Caddy creates its http.Server when it
// starts, after provisioning; the settings are made when the server's
// first connection comes in, before any request is served (the Once
// orders it before every connection's start; Go reads HTTP2 for each
// connection).
func hookServer(ctx caddy.Context) {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return
	}
	if _, done := hooked.LoadOrStore(srv, struct{}{}); done {
		return
	}
	ctx.OnCancel(func() { hooked.Delete(srv) })
	warnMissingWrappers(ctx, srv)
	var once sync.Once
	srv.RegisterConnContext(func(c context.Context, conn net.Conn) context.Context {
		once.Do(func() {
			if hs, ok := c.Value(http.ServerContextKey).(*http.Server); ok {
				hs.DisableGeneralOptionsHandler = true
				if n, ok := streamsOf.Load(srv); ok {
					if hs.HTTP2 == nil {
						hs.HTTP2 = &http.HTTP2Config{}
					}
					hs.HTTP2.MaxConcurrentStreams = int(n.(*atomic.Int64).Load())
				}
			}
		})
		return serve.WithConn(c, conn)
	})
}

// streamsOf records, per Caddy server, the most requests one connection
// may have in Ruby among its ruvoy handlers: HTTP/2's concurrent streams.
var streamsOf sync.Map // *caddyhttp.Server -> *atomic.Int64

// noteStreams records the places a connection may hold in a handler of
// the server ctx provisions.
func noteStreams(ctx caddy.Context, n int) {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return
	}
	v, _ := streamsOf.LoadOrStore(srv, new(atomic.Int64))
	most := v.(*atomic.Int64)
	for {
		old := most.Load()
		if int64(n) <= old || most.CompareAndSwap(old, int64(n)) {
			break
		}
	}
	ctx.OnCancel(func() { streamsOf.Delete(srv) })
}

// wrappersOf records, per Caddy server, which of ruvoy's listener wrappers
// it has: they are provisioned before the server's handlers (Caddy clears
// the raw config a module came from once it is loaded, so the handler
// cannot read it there).
var wrappersOf sync.Map // *caddyhttp.Server -> *sync.Map of names

// noteWrapper records a listener wrapper of the server ctx provisions.
func noteWrapper(ctx caddy.Context, name string) {
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		names, _ := wrappersOf.LoadOrStore(srv, new(sync.Map))
		names.(*sync.Map).Store(name, true)
		ctx.OnCancel(func() { wrappersOf.Delete(srv) })
	}
}

// warnMissingWrappers says, once per server, which of the listener wrappers
// `ruvoy config.ru` puts in front of every app a server lacks, and what is
// lost without it (docs/configuration.md shows the lines).
func warnMissingWrappers(ctx caddy.Context, srv *caddyhttp.Server) {
	names, _ := wrappersOf.Load(srv)
	for _, w := range []struct{ name, without string }{
		{"ruvoy_http1_guard", "request-smuggling shapes (Transfer-Encoding with Content-Length, obs-fold, malformed chunks) reach Go's parser, which accepts some"},
		{"ruvoy_drain", "on a stop or reload, Go closes unanswered the first request of connections accepted just before"},
	} {
		if names != nil {
			if _, ok := names.(*sync.Map).Load(w.name); ok {
				continue
			}
		}
		ctx.Logger().Warn("ruvoy: this server has no "+w.name+" listener wrapper: "+w.without,
			zap.String("add", "servers { listener_wrappers { ruvoy_drain ruvoy_connection_ids tls ruvoy_http1_guard } }"),
			zap.String("see", "docs/configuration.md#the-caddyfile-directive"))
	}
}
