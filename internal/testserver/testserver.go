// Package testserver is what the harnesses that start the real binary
// share (the end-to-end tests in test/, the stress harness, the
// benchmarks, the fuzzer): a free port, and the wait until a server
// listens on it.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment
// ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// ErrExited is what WaitListening returns when the server exited first.
var ErrExited = errors.New("the server exited before it listened")

// WaitListening waits up to d until something accepts connections on
// addr, or exited is closed (nil: never). A dial to a port nobody listens
// on yet can connect to itself (TCP's simultaneous open, when the kernel
// picks that port for the dial): that is not the server, and the wait
// goes on.
func WaitListening(addr string, d time.Duration, exited <-chan struct{}) error {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return ErrExited
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			self := c.LocalAddr().String() == c.RemoteAddr().String()
			c.Close()
			if !self {
				return nil
			}
		}
	}
	return fmt.Errorf("nothing listened on %s within %v", addr, d)
}
