package ruvoycaddy

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/ruvoy/ruvoy/internal/conn"
)

func init() {
	caddy.RegisterModule(ConnectionIDs{})
}

// ConnectionIDs is the listener wrapper caddy.listeners.ruvoy_connection_ids:
// it numbers the connections a server accepts, for the "id" of
// env["ruvoy.context"].connection. Without it that id is nil.
type ConnectionIDs struct{}

// CaddyModule returns the Caddy module information.
func (ConnectionIDs) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.ruvoy_connection_ids",
		New: func() caddy.Module { return new(ConnectionIDs) },
	}
}

// UnmarshalCaddyfile reads the wrapper's name; it takes no options
// (servers { listener_wrappers { ruvoy_connection_ids } }).
func (*ConnectionIDs) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// WrapListener numbers each connection the listener accepts.
func (ConnectionIDs) WrapListener(l net.Listener) net.Listener { return &numbered{Listener: l} }

var (
	lastConnID atomic.Uint64
	connIDs    sync.Map // "remote|local" -> uint64, while the connection is open
)

type numbered struct{ net.Listener }

func (l *numbered) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	key := c.RemoteAddr().String() + "|" + c.LocalAddr().String()
	id := lastConnID.Add(1)
	connIDs.Store(key, id)
	nc := &numberedConn{Conn: c, key: key, id: id}
	conn.Register(nc)
	return nc, nil
}

type numberedConn struct {
	net.Conn
	key  string
	id   uint64
	once sync.Once
}

// NetConn is the connection numbered (internal/conn follows it).
func (c *numberedConn) NetConn() net.Conn { return c.Conn }

func (c *numberedConn) Close() error {
	conn.Forget(c)
	c.once.Do(func() { connIDs.CompareAndDelete(c.key, c.id) })
	return c.Conn.Close()
}

// connectionID is the number ConnectionIDs gave r's connection.
func connectionID(r *http.Request) (uint64, bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return 0, false
	}
	id, ok := connIDs.Load(r.RemoteAddr + "|" + local.String())
	if !ok {
		return 0, false
	}
	return id.(uint64), true
}

var (
	_ caddy.ListenerWrapper = ConnectionIDs{}
	_ caddyfile.Unmarshaler = (*ConnectionIDs)(nil)
)
