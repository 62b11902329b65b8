package conn

import (
	"net"
	"testing"
	"time"
)

// The TCP connection is found under wrappers that say what they wrap
// (NetConn), and under one that does not (Caddy's) through what a ruvoy
// wrapper registered under the same addresses.
func TestTCPUnwraps(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tcp := c.(*net.TCPConn)
	ours := unwrapper{unwrapper{c}}
	Register(ours)
	defer Forget(ours)
	for _, wrapped := range []net.Conn{c, unwrapper{c}, ours, opaque{ours}} {
		if TCP(wrapped) != tcp {
			t.Errorf("%T: not unwrapped", wrapped)
		}
	}
	Forget(ours)
	if TCP(opaque{ours}) != nil {
		t.Errorf("under an opaque wrapper, once forgotten: still found")
	}
}

// unwrapper says what it wraps, as ruvoy's wrappers and tls.Conn do.
type unwrapper struct{ inner net.Conn }

func (n unwrapper) NetConn() net.Conn                  { return n.inner }
func (n unwrapper) Read(p []byte) (int, error)         { return n.inner.Read(p) }
func (n unwrapper) Write(p []byte) (int, error)        { return n.inner.Write(p) }
func (n unwrapper) Close() error                       { return n.inner.Close() }
func (n unwrapper) LocalAddr() net.Addr                { return n.inner.LocalAddr() }
func (n unwrapper) RemoteAddr() net.Addr               { return n.inner.RemoteAddr() }
func (n unwrapper) SetDeadline(t time.Time) error      { return nil }
func (n unwrapper) SetReadDeadline(t time.Time) error  { return nil }
func (n unwrapper) SetWriteDeadline(t time.Time) error { return nil }

// opaque wraps without saying what, as Caddy's tlsStateConn does.
type opaque struct{ net.Conn }
