package conn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Pumped hijacked connections: where Go must stay between the client and
// the app (TLS, bytes read ahead), the app gets one end of a socket pair
// and Go copies bytes between the other end and the connection, one
// goroutine each way.

// A Pump is a hijacked connection as Go pumps it.
type Pump struct {
	pumps  *Pumps
	client net.Conn        // the client's connection, as the server had it
	raw    syscall.RawConn // its socket, to wait on without a buffer; nil over TLS or a wrapper Go cannot see through
	app    *net.UnixConn   // Go's end of the socket pair
	once   sync.Once
}

// Pumps are the connections a server pumps, until they close.
type Pumps struct {
	mu  sync.Mutex
	all map[*Pump]struct{}
	// OnPump hears of each new one (its bytes are work no request counts).
	OnPump func()
}

// New makes a socket pair for conn: the pump (Run starts it) and the
// descriptor of the app's end.
func (ps *Pumps) New(conn net.Conn) (*Pump, int, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, err
	}
	f := os.NewFile(uintptr(fds[0]), "ruvoy-hijacked")
	c, err := net.FileConn(f) // a copy of the descriptor, in Go's poller
	f.Close()
	if err == nil {
		err = syscall.SetNonblock(fds[1], true) // the app's reads wait in the Fiber scheduler
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		syscall.Close(fds[1])
		return nil, -1, err
	}
	h := &Pump{pumps: ps, client: conn, app: c.(*net.UnixConn)}
	if t := TCP(conn); t != nil && !OverTLS(conn) {
		h.raw, _ = t.SyscallConn()
	}
	ps.track(h)
	return h, fds[1], nil
}

// Run pumps both ways, pending first to the app.
func (h *Pump) Run(pending []byte) {
	go func() {
		err := h.toApp(pending)
		if errors.Is(err, io.EOF) {
			h.app.CloseWrite() // the client half-closed: the app reads EOF
			return
		}
		h.Close()
	}()
	go func() {
		appRaw, _ := h.app.SyscallConn()
		pump(h.client, h.app, appRaw)
		h.Close() // the app closed its end (or a side failed)
	}()
}

func (h *Pump) toApp(pending []byte) error {
	if len(pending) > 0 {
		if _, err := h.app.Write(pending); err != nil {
			return err
		}
	}
	return pump(h.app, h.client, h.raw)
}

// Close ends the connection and the app's end, once.
func (h *Pump) Close() {
	h.once.Do(func() {
		h.client.Close()
		h.app.Close()
		h.pumps.untrack(h)
	})
}

var pumpBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// pump copies src to dst until src ends or either side fails; io.EOF is
// a clean end. With raw (src's socket), it waits for src to be readable
// before it takes a buffer.
func pump(dst io.Writer, src io.Reader, raw syscall.RawConn) error {
	for {
		if raw != nil {
			if err := waitReadable(raw); err != nil {
				return err
			}
		}
		bp := pumpBuffers.Get().(*[]byte)
		n, err := src.Read(*bp)
		if n > 0 {
			if _, werr := dst.Write((*bp)[:n]); werr != nil {
				pumpBuffers.Put(bp)
				return werr
			}
		}
		pumpBuffers.Put(bp)
		if err != nil {
			return err
		}
	}
}

// waitReadable parks until the socket has bytes (or an end) to read.
func waitReadable(raw syscall.RawConn) error {
	var b [1]byte
	return raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN
	})
}

func (ps *Pumps) track(h *Pump) {
	ps.mu.Lock()
	if ps.all == nil {
		ps.all = map[*Pump]struct{}{}
	}
	ps.all[h] = struct{}{}
	ps.mu.Unlock()
	if ps.OnPump != nil {
		ps.OnPump()
	}
}

func (ps *Pumps) untrack(h *Pump) {
	ps.mu.Lock()
	delete(ps.all, h)
	ps.mu.Unlock()
}

// Any says whether Go pumps any hijacked connection's bytes.
func (ps *Pumps) Any() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.all) > 0
}

// CloseAll closes every pumped connection (the server is stopping) and
// says how many there were.
func (ps *Pumps) CloseAll() int {
	ps.mu.Lock()
	all := make([]*Pump, 0, len(ps.all))
	for h := range ps.all {
		all = append(all, h)
	}
	ps.mu.Unlock()
	for _, h := range all {
		h.Close()
	}
	return len(all)
}
