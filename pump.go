package ruvoy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"go.uber.org/zap"
)

// Pumped hijacked connections: where Go must stay between the client and
// the app (hijack.go), the app gets one end of a socket pair and Go copies
// bytes between the other end and the connection, one goroutine each way.

// A hijacked connection as Go pumps it.
type hijacked struct {
	rt     *Runtime
	client net.Conn        // the client's connection, as the server had it
	raw    syscall.RawConn // its socket, to wait on without a buffer; nil over TLS or a wrapper Go cannot see through
	app    *net.UnixConn   // Go's end of the socket pair
	once   sync.Once
}

// newPump makes a socket pair for conn: the pump (run starts it) and the
// descriptor of the app's end.
func (rt *Runtime) newPump(conn net.Conn) (*hijacked, int, error) {
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
	h := &hijacked{rt: rt, client: conn, app: c.(*net.UnixConn)}
	if t := tcpConn(conn); t != nil && !overTLS(conn) {
		h.raw, _ = t.SyscallConn()
	}
	rt.track(h)
	return h, fds[1], nil
}

// run pumps both ways, pending first to the app.
func (h *hijacked) run(pending []byte) {
	go func() {
		err := h.toApp(pending)
		if errors.Is(err, io.EOF) {
			h.app.CloseWrite() // the client half-closed: the app reads EOF
			return
		}
		h.close()
	}()
	go func() {
		appRaw, _ := h.app.SyscallConn()
		pump(h.client, h.app, appRaw)
		h.close() // the app closed its end (or a side failed)
	}()
}

func (h *hijacked) toApp(pending []byte) error {
	if len(pending) > 0 {
		if _, err := h.app.Write(pending); err != nil {
			return err
		}
	}
	return pump(h.app, h.client, h.raw)
}

// close ends the connection and the app's end, once.
func (h *hijacked) close() {
	h.once.Do(func() {
		h.client.Close()
		h.app.Close()
		h.rt.untrack(h)
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

// track counts a hijacked connection until it closes.
func (rt *Runtime) track(h *hijacked) {
	rt.hijackMu.Lock()
	if rt.hijacks == nil {
		rt.hijacks = map[*hijacked]struct{}{}
	}
	rt.hijacks[h] = struct{}{}
	rt.hijackMu.Unlock()
	rt.procs.busy() // Go pumps its bytes: more than one lone request's work
}

// pumping says whether Go pumps any hijacked connection's bytes.
func (rt *Runtime) pumping() bool {
	rt.hijackMu.Lock()
	defer rt.hijackMu.Unlock()
	return len(rt.hijacks) > 0
}

func (rt *Runtime) untrack(h *hijacked) {
	rt.hijackMu.Lock()
	delete(rt.hijacks, h)
	rt.hijackMu.Unlock()
}

// closeHijacked closes the hijacked connections Go pumps, and says how
// many the apps hold (the others close as the VMs stop): the server is
// stopping.
func (rt *Runtime) closeHijacked() {
	rt.hijackMu.Lock()
	all := make([]*hijacked, 0, len(rt.hijacks))
	for h := range rt.hijacks {
		all = append(all, h)
	}
	rt.hijackMu.Unlock()
	if n := max(rt.Stats().Hijacked, len(all)); n > 0 {
		rt.log().Info("ruvoy: closing hijacked connections (WebSockets and the like): the server is stopping", zap.Int("connections", n))
	}
	for _, h := range all {
		h.close()
	}
}
