package serve

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
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
