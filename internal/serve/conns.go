package serve

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/ruvoy/ruvoy/internal/conn"
)

type connKey struct{}

// connInfo is what the request path keeps about a server connection: the
// connection (its plumbing, internal/conn), its requests in Ruby (HTTP/2
// and 3: admission bounds them), and how many of them its client left
// while Ruby still unwinds them.
type connInfo struct {
	conn    conn.Conn
	orphans atomic.Int32
	places  connPlaces
}

// plumbing is the connection as internal/conn follows it (nil-safe).
func (c *connInfo) plumbing() *conn.Conn {
	if c == nil {
		return nil
	}
	return &c.conn
}

// WithConn records a server connection in its context, for the handler to
// watch (the Caddy module sets it for every connection it serves).
func WithConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connInfo{conn: conn.Conn{Conn: c}})
}

func connOf(r *http.Request) *connInfo {
	c, _ := r.Context().Value(connKey{}).(*connInfo)
	return c
}
