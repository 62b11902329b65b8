package serve

import (
	"strconv"
	"strings"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// What a VM sends about requests reaches the runtime here: this
// process's, from its dispatcher or a direct line (router is its
// host.Router), and each worker's, from its frame reader (the pools'
// frontend.Router).
type router Runtime

func (r *router) rt() *Runtime { return (*Runtime)(r) }

// Route routes a chain of a VM's messages. Consecutive messages for one
// stream's queue go to it as one run (streams.deliver).
func (r *router) Route(m *msg.Msg) {
	for m != nil {
		last := m
		if queued(m.Kind()) {
			for n := last.Next(); n != nil && n.Stream() == m.Stream() && queued(n.Kind()); n = n.Next() {
				last = n
			}
		}
		next := last.Next()
		last.SetNext(nil)
		r.route(m)
		m = next
	}
}

// queued says whether a message of kind goes to its stream's queue, which
// its handler reads.
func queued(kind uint32) bool {
	switch kind {
	case wire.OutLog, wire.OutUpstream, wire.OutUpstreamCancel, wire.OutCredit:
		return false
	}
	return true
}

// route routes a message, or a run of messages for one stream's queue.
func (r *router) route(m *msg.Msg) {
	rt := r.rt()
	defer func() {
		if p := recover(); p != nil {
			rt.log().Error("ruvoy: panic while routing a VM message", zap.Any("panic", p))
		}
	}()
	switch m.Kind() {
	case wire.OutLog:
		r.Log(m)
		m.Free()
	case wire.OutUpstream:
		rt.streams.startUpstream(m)
	case wire.OutUpstreamCancel:
		rt.streams.cancelUpstream(m)
	default:
		rt.streams.deliver(m)
	}
}

// Describe names the request a stream id belongs to, for log lines.
func (r *router) Describe(stream uint64) (method, path string, ok bool) {
	return r.streams.describe(stream)
}

// Log writes a log entry a VM made: a message, then name/value pairs; a
// backtrace becomes a list of lines, and a number of milliseconds (a name
// ending in _ms) a number; extra fields come first. The caller frees m.
func (r *router) Log(m *msg.Msg, extra ...zap.Field) {
	rt := r.rt()
	parts := wire.ReadStrings(m.Payload())
	if len(parts) == 0 {
		return
	}
	fields := make([]zap.Field, 0, len(parts)/2+2+len(extra))
	fields = append(fields, extra...)
	if m.Stream() != 0 {
		if method, path, ok := rt.streams.describe(uint64(m.Stream())); ok {
			fields = append(fields, zap.String("method", method), zap.String("path", path))
		}
	}
	for i := 1; i+1 < len(parts); i += 2 {
		if parts[i] == "backtrace" {
			fields = append(fields, zap.Strings(parts[i], strings.Split(parts[i+1], "\n")))
		} else if n, err := strconv.ParseInt(parts[i+1], 10, 64); err == nil && strings.HasSuffix(parts[i], "_ms") {
			fields = append(fields, zap.Int64(parts[i], n))
		} else {
			fields = append(fields, zap.String(parts[i], parts[i+1]))
		}
	}
	switch m.Flags() {
	case wire.LogDebug:
		rt.log().Debug(parts[0], fields...)
	case wire.LogInfo:
		rt.log().Info(parts[0], fields...)
	case wire.LogWarn:
		rt.log().Warn(parts[0], fields...)
	default:
		rt.log().Error(parts[0], fields...)
	}
}
