package serve

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Responses cut for the write timeout.
//
// The server's write timeout (Caddy's write_idle_timeout, ruvoy's
// --write-timeout) fails a write that does not finish in time: a client
// that takes none of the response (an HTTP/2 stream whose window stays
// at 0, a socket never read) no longer holds its place in Ruby, and its
// fiber hears Ruvoy::ClientDisconnected. A failed write looks like any
// client that left; these are told apart by the error (HTTP/1: the
// connection's deadline) or by how long the write that failed had been
// under way (HTTP/2 and 3 reset the stream). The count is a metric; the
// log gets at most one line a second, so that an attacker's stalled
// streams cannot flood it.

// writeCuts counts the responses cut for the write timeout and says so
// in the log.
type writeCuts struct {
	total  atomic.Int64
	mu     sync.Mutex
	logged time.Time // when the last line went out
	unsaid int64     // cuts since then
}

// stalled reports whether a write that failed with err after running
// for took was cut by the write timeout (timeout: the server's; 0: off).
func stalled(err error, took, timeout time.Duration) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || (timeout > 0 && took >= timeout)
}

// cut counts one response cut for the write timeout, and logs the count
// at most once a second.
func (c *writeCuts) cut(rt *Runtime, r *http.Request, sent int64, timeout time.Duration) {
	c.total.Add(1)
	c.mu.Lock()
	c.unsaid++
	if time.Since(c.logged) < time.Second {
		c.mu.Unlock()
		return
	}
	n := c.unsaid
	c.unsaid, c.logged = 0, time.Now()
	c.mu.Unlock()
	rt.log().Warn("ruvoy: a client took no response bytes for the write timeout: the response was cut, its place in Ruby given back",
		zap.Int64("responses_cut", n), zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.String("proto", r.Proto), zap.Int64("bytes_sent", sent), zap.Duration("write_timeout", timeout))
}
