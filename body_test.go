package ruvoy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// How a failed body read is told apart: the verdict decides between a 400,
// a 408, a 413 and nothing (a client that left).
func TestClassifyBodyError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int32
	}{
		{io.ErrUnexpectedEOF, bodyMalformed},
		{errors.New("malformed chunked encoding"), bodyMalformed},
		{errors.New("chunked line ends with bare LF"), bodyMalformed},
		{&http.MaxBytesError{Limit: 10}, bodyTooLarge},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), bodyTimeout},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, bodyGone},
		{net.ErrClosed, bodyGone},
	} {
		if got, _ := classifyBodyError(c.err); got != c.want {
			t.Errorf("%v: got %d, want %d", c.err, got, c.want)
		}
	}
}

// tcpConn finds the TCP connection under wrappers that embed it as Conn,
// or offer NetConn.
func TestTCPConnUnwraps(t *testing.T) {
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
	type embedding struct{ net.Conn }
	type pointing struct{ *embedding }
	for _, wrapped := range []net.Conn{c, embedding{c}, &embedding{embedding{c}}, pointing{&embedding{c}}, netConner{c}} {
		if tcpConn(wrapped) != c.(*net.TCPConn) {
			t.Errorf("%T: not unwrapped", wrapped)
		}
	}
}

type netConner struct{ inner net.Conn }

func (n netConner) NetConn() net.Conn                  { return n.inner }
func (n netConner) Read(p []byte) (int, error)         { return n.inner.Read(p) }
func (n netConner) Write(p []byte) (int, error)        { return n.inner.Write(p) }
func (n netConner) Close() error                       { return n.inner.Close() }
func (n netConner) LocalAddr() net.Addr                { return n.inner.LocalAddr() }
func (n netConner) RemoteAddr() net.Addr               { return n.inner.RemoteAddr() }
func (n netConner) SetDeadline(t time.Time) error      { return nil }
func (n netConner) SetReadDeadline(t time.Time) error  { return nil }
func (n netConner) SetWriteDeadline(t time.Time) error { return nil }
