package frontend

import (
	"net"
	"sync"
	"syscall"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// A frameWriter sends frames (wire.h: "Workers") to the other end of a
// worker's socket. Senders append to a batch; whoever finds no write under
// way writes the batch itself, with one sendmsg, and goes on while others
// appended meanwhile: a busy side pays one syscall per batch and no
// goroutine hand-off. A file descriptor an RV_OUT_FILE message carries
// goes along with its frame (SCM_RIGHTS) and is closed here once sent.
// The batch holds what the frames carry, which the budgets already bound:
// requests admitted, body bytes, response windows.
type frameWriter struct {
	conn     *net.UnixConn
	mu       sync.Mutex
	room     sync.Cond // a batch was taken: room for more descriptors
	buf      []byte
	fds      []int
	spare    []byte
	writing  bool // a sender is writing a batch
	closed   bool // nothing more is taken
	finished bool // the write side is shut once the batch is out
}

// maxBatchFDs keeps a batch's descriptors under the kernel's limit for one
// message (wire.h's RV_FRAME_MAX_FDS, which the worker's relay keeps too).
const maxBatchFDs = wire.FrameMaxFds

func newFrameWriter(c *net.UnixConn) *frameWriter {
	fw := &frameWriter{conn: c}
	fw.room.L = &fw.mu
	return fw
}

// send appends a frame and writes what is pending.
func (fw *frameWriter) send(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	fw.mu.Lock()
	if !fw.closed {
		fw.buf = wire.AppendFrame(fw.buf, kind, stream, flags, aux, payload)
	}
	fw.flushLocked()
}

// add appends a frame for the next flush.
func (fw *frameWriter) add(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	fw.mu.Lock()
	if !fw.closed {
		fw.buf = wire.AppendFrame(fw.buf, kind, stream, flags, aux, payload)
	}
	fw.mu.Unlock()
}

// addFile appends a frame (f, with payload; f.Len is payload's) that
// carries the descriptor fd, which the writer owns from now on.
func (fw *frameWriter) addFile(f wire.Frame, payload []byte, fd int) {
	fw.mu.Lock()
	for len(fw.fds) >= maxBatchFDs && !fw.closed {
		fw.flushLocked()
		fw.mu.Lock()
		if len(fw.fds) >= maxBatchFDs && fw.writing {
			fw.room.Wait()
		}
	}
	if fw.closed {
		fw.mu.Unlock()
		syscall.Close(fd)
		return
	}
	// The descriptor reaches the other side no later than its frame: it
	// goes with the sendmsg that starts the batch holding the frame.
	fw.buf = wire.AppendFrame(fw.buf, f.Kind, f.Stream, f.Flags, f.Aux, payload)
	fw.fds = append(fw.fds, fd)
	fw.mu.Unlock()
}

// flush writes what is pending, unless another sender already does.
func (fw *frameWriter) flush() {
	fw.mu.Lock()
	fw.flushLocked()
}

// flushLocked is flush with fw.mu held; it returns with fw.mu released.
func (fw *frameWriter) flushLocked() {
	if fw.writing {
		fw.mu.Unlock()
		return
	}
	fw.writing = true
	for len(fw.buf) > 0 {
		b, fds := fw.buf, fw.fds
		fw.buf, fw.fds = fw.spare[:0], nil
		fw.room.Broadcast()
		fw.mu.Unlock()
		err := fw.write(b, fds)
		for _, fd := range fds {
			syscall.Close(fd)
		}
		fw.mu.Lock()
		if err != nil {
			fw.dropLocked()
		}
		fw.spare = b // fw.buf now holds the old spare
		if cap(b) > 1<<20 {
			fw.spare = nil // a burst's buffer is not kept
		}
	}
	fw.writing = false
	if fw.finished {
		fw.conn.CloseWrite()
	}
	fw.mu.Unlock()
}

func (fw *frameWriter) write(b []byte, fds []int) error {
	if len(fds) > 0 {
		n, _, err := fw.conn.WriteMsgUnix(b, syscall.UnixRights(fds...), nil)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	for len(b) > 0 {
		n, err := fw.conn.Write(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (fw *frameWriter) dropLocked() {
	fw.closed = true
	for _, fd := range fw.fds {
		syscall.Close(fd)
	}
	fw.buf, fw.fds = nil, nil
	fw.room.Broadcast()
}

// close drops what is not yet written and what comes later.
func (fw *frameWriter) close() {
	fw.mu.Lock()
	fw.dropLocked()
	fw.mu.Unlock()
}

// finish writes what is pending and shuts the socket's write side; later
// frames are dropped.
func (fw *frameWriter) finish() {
	fw.mu.Lock()
	fw.closed, fw.finished = true, true
	fw.flushLocked()
}
