package frontend

import (
	"errors"
	"net"
	"syscall"
)

// A frameReader reads a worker's socket, keeping the file descriptors that
// arrive with the bytes (SCM_RIGHTS) in order: an RV_OUT_FILE frame takes
// the oldest one, which arrived no later than the frame itself.
type frameReader struct {
	conn *net.UnixConn
	oob  []byte
	fds  []int
}

var errFDLost = errors.New("ruvoy: a file descriptor from a worker was lost (control message cut short)")

func newFrameReader(c *net.UnixConn) *frameReader {
	return &frameReader{conn: c, oob: make([]byte, syscall.CmsgSpace(4*(maxBatchFDs+16)))}
}

func (r *frameReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.conn.ReadMsgUnix(p, r.oob)
	if n < 0 {
		// recvmsg failed (a worker killed mid-write resets the socket):
		// the -1 it returns is no count for a bufio.Reader, which panics.
		n = 0
	}
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(r.oob[:oobn])
		for i := range msgs {
			if fds, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
				r.fds = append(r.fds, fds...)
			}
		}
		if perr != nil && err == nil {
			err = perr
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 && err == nil {
		err = errFDLost
	}
	return n, err
}

// takeFD is the oldest descriptor received and not yet taken, or -1.
func (r *frameReader) takeFD() int {
	if len(r.fds) == 0 {
		return -1
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd
}

// closeFDs closes the descriptors nobody took.
func (r *frameReader) closeFDs() {
	for _, fd := range r.fds {
		syscall.Close(fd)
	}
	r.fds = nil
}
