package ruvoycaddy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/conn"
)

func init() {
	caddy.RegisterModule(new(Drain))
}

// Drain is the listener wrapper caddy.listeners.ruvoy_drain: when its
// config stops (SIGTERM, SIGINT, `ruvoy stop`, or the old config of a
// reload), it stops accepting and waits until every connection it accepted
// has had its first request head read (or been answered, or closed), and
// only then lets the server shut down.
//
// Why: Go's HTTP/1 server, once Shutdown has begun, closes a connection
// whose request head it reads afterwards without answering it, even on a
// connection it accepted before; a client that does not retry (keep-alives
// off, or a POST) sees the request fail. Go checks right after it has read
// a head, so settle after that read it is past the check, and the request
// is served within the grace period like any other.
//
// Before all that, when the process exits (SIGTERM) and Delay is set, it
// goes on accepting and serving for Delay while the health check answers
// 503 (Health): a load balancer takes the host out of its rotation first,
// and then nothing new comes to a closing port. (Caddy's shutdown_delay
// does the same, but only after this wrapper has stopped accepting.)
//
// It waits for connections that have sent part of a head, for silent ones
// (nothing sent yet) for silentWait, and settle after the last head ended;
// at most drainLimit in all. It reads cleartext bytes: a TLS connection is
// answered by its handshake first, so over TLS it does not help (place it
// before tls).
type Drain struct {
	// Delay is how long a process exit serves on before it stops
	// accepting (--drain-delay).
	Delay caddy.Duration `json:"delay,omitempty"`

	logger    *zap.Logger
	mu        sync.Mutex
	listeners []*drainListener
}

const (
	// drainLimit bounds the wait, as net/http's Shutdown stops waiting for
	// a connection that has not sent its first request in 5 s.
	drainLimit = 5 * time.Second
	// silentWait is how long a connection that has sent nothing is awaited:
	// a client sends its request right after connecting.
	silentWait = 500 * time.Millisecond
	// settle is how long after a head has been read Go is taken to have
	// checked for shutdown: that takes microseconds.
	settle = 100 * time.Millisecond
)

// CaddyModule returns the Caddy module information.
func (*Drain) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.ruvoy_drain",
		New: func() caddy.Module { return new(Drain) },
	}
}

// UnmarshalCaddyfile reads the wrapper and its one option:
//
//	servers { listener_wrappers { ruvoy_drain { delay 5s } tls } }
func (d *Drain) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next()
	if disp.NextArg() {
		return disp.ArgErr()
	}
	for disp.NextBlock(0) {
		if disp.Val() != "delay" {
			return disp.Errf("ruvoy_drain: unknown option %q (it takes delay DURATION)", disp.Val())
		}
		if !disp.NextArg() {
			return disp.ArgErr()
		}
		v, err := caddy.ParseDuration(disp.Val())
		if err != nil || v < 0 {
			return disp.Errf("ruvoy_drain: delay %q is not a duration", disp.Val())
		}
		d.Delay = caddy.Duration(v)
		if disp.NextArg() {
			return disp.ArgErr()
		}
	}
	return nil
}

// Provision subscribes the wrapper to its config's "stopping" event, which
// Caddy emits, and waits on, before it stops any server. (Caddy's events
// app takes subscriptions without a lock against Emit, as for the ones a
// config lists, which it adds at Start: a module emitting while others are
// provisioned, an active health check reporting a host, races with them.
// Nothing in `ruvoy config.ru`'s config does.)
func (d *Drain) Provision(ctx caddy.Context) error {
	noteWrapper(ctx, "ruvoy_drain")
	d.logger = ctx.Logger()
	events, err := ctx.App("events")
	if err != nil {
		return err
	}
	return events.(*caddyevents.App).On("stopping", d)
}

// WrapListener counts the connections l accepts by how far they are
// through their first request head.
func (d *Drain) WrapListener(l net.Listener) net.Listener {
	dl := &drainListener{Listener: l, closed: make(chan struct{})}
	d.mu.Lock()
	d.listeners = append(d.listeners, dl)
	d.mu.Unlock()
	return dl
}

// Handle drains the wrapper's listeners: the "stopping" event.
func (d *Drain) Handle(context.Context, caddy.Event) error {
	if d.Delay > 0 && caddy.Exiting() {
		d.logger.Info("ruvoy: draining: serving on while the health check answers 503, then stopping",
			zap.Duration("delay", time.Duration(d.Delay)))
		time.Sleep(time.Duration(d.Delay))
	}
	d.mu.Lock()
	listeners := d.listeners
	d.mu.Unlock()
	start := time.Now()
	for _, l := range listeners {
		l.stopAccepting()
	}
	for {
		waiting := 0
		settled := true
		for _, l := range listeners {
			waiting += l.waiting(time.Since(start) < silentWait)
			settled = settled && time.Duration(time.Now().UnixNano()-l.lastHead.Load()) >= settle
		}
		if waiting == 0 && settled {
			return nil
		}
		if time.Since(start) > drainLimit {
			d.logger.Warn("shutting down with connections whose first request head is not read",
				zap.Int("connections", waiting), zap.Duration("waited", drainLimit))
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// drainListener counts its accepted connections by state. Once draining, it
// accepts no more; its Accept then blocks until the server closes it, so
// that the server sees the close it made itself.
type drainListener struct {
	net.Listener
	accepting atomic.Int64 // Accept calls under way
	silent    atomic.Int64 // connections that have sent nothing
	reading   atomic.Int64 // connections amid their first head
	lastHead  atomic.Int64 // when a first head last ended (Unix ns)
	draining  atomic.Bool
	stopOnce  sync.Once // closes the listening socket
	stopErr   error
	closeOnce sync.Once // closes closed
	closed    chan struct{}
}

func (l *drainListener) Accept() (net.Conn, error) {
	l.accepting.Add(1)
	c, err := l.Listener.Accept()
	if err == nil {
		l.silent.Add(1)
	}
	l.accepting.Add(-1)
	if err != nil && l.draining.Load() {
		<-l.closed
		return nil, net.ErrClosed
	}
	if err != nil {
		return nil, err
	}
	dc := &drainConn{Conn: c, l: l}
	conn.Register(dc)
	return dc, nil
}

func (l *drainListener) Close() error {
	err := l.closeSocket()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

// stopAccepting closes the listening socket but not the wrapper.
func (l *drainListener) stopAccepting() {
	l.draining.Store(true)
	l.closeSocket()
}

func (l *drainListener) closeSocket() error {
	l.stopOnce.Do(func() { l.stopErr = l.Listener.Close() })
	return l.stopErr
}

// waiting is the number of connections to wait for: those still in Accept,
// those amid their first head, and the silent ones if withSilent.
func (l *drainListener) waiting(withSilent bool) int {
	n := l.accepting.Load() + l.reading.Load()
	if withSilent {
		n += l.silent.Load()
	}
	return int(n)
}

// Connection states: sent nothing, amid the first head, past it (or
// answered, or closed).
const (
	connSilent int32 = iota
	connReading
	connDone
)

type drainConn struct {
	net.Conn
	l     *drainListener
	state atomic.Int32
	// blank: the first head's current line is empty so far (an empty
	// line ends the head). Used by Read only, which net/http does not
	// call concurrently.
	blank bool
}

func (c *drainConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state.Load() != connDone {
		if c.state.CompareAndSwap(connSilent, connReading) {
			c.l.silent.Add(-1)
			c.l.reading.Add(1)
		}
		if c.headEnds(p[:n]) {
			c.l.lastHead.Store(time.Now().UnixNano())
			c.done()
		}
	}
	return n, err
}

// headEnds follows the first head's lines through b and reports whether an
// empty line (CRLF or a bare LF, as Go accepts) ends it there.
func (c *drainConn) headEnds(b []byte) bool {
	for _, x := range b {
		switch x {
		case '\n':
			if c.blank {
				return true
			}
			c.blank = true
		case '\r':
		default:
			c.blank = false
		}
	}
	return false
}

func (c *drainConn) Write(p []byte) (int, error) {
	if c.state.Load() != connDone {
		c.done()
	}
	return c.Conn.Write(p)
}

// NetConn is the connection the drain wraps (internal/conn follows it).
func (c *drainConn) NetConn() net.Conn { return c.Conn }

func (c *drainConn) Close() error {
	conn.Forget(c)
	c.done()
	return c.Conn.Close()
}

// done moves the connection out of the counts, once.
func (c *drainConn) done() {
	for {
		s := c.state.Load()
		if s == connDone {
			return
		}
		if c.state.CompareAndSwap(s, connDone) {
			if s == connSilent {
				c.l.silent.Add(-1)
			} else {
				c.l.reading.Add(-1)
			}
			return
		}
	}
}

var (
	_ caddy.ListenerWrapper = (*Drain)(nil)
	_ caddy.Provisioner     = (*Drain)(nil)
	_ caddyevents.Handler   = (*Drain)(nil)
	_ caddyfile.Unmarshaler = (*Drain)(nil)
)
