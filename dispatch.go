package ruvoy

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// dispatch is the one goroutine that takes the VM's messages: it drains
// Go's inbox whole, hands each message to its request's stream, and sleeps
// on the inbox's eventfd (in Go's netpoller, holding no thread) only when
// the inbox is empty, so a busy VM costs no syscall per message.
func (rt *Runtime) dispatch() {
	wake := os.NewFile(uintptr(ruby.InboxFD()), "ruvoy-go-inbox")
	var buf [8]byte
	for {
		rt.dispatching.Store(true)
		m := ruby.Poll()
		if m == nil {
			rt.dispatching.Store(false)
			if _, err := wake.Read(buf[:]); err != nil {
				rt.log().Error("ruvoy: reading the VM's wakeup descriptor failed", zap.Error(err))
			}
			continue
		}
		rt.routeAll(m)
	}
}

// drainInbox routes what the VM sent as it stopped (its shutdown hooks'
// log lines) before the process goes on to exit: once the inbox is empty
// and the dispatcher holds none of it, or after wait.
func (rt *Runtime) drainInbox(wait time.Duration) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		if m := ruby.Poll(); m != nil {
			rt.routeAll(m)
			continue
		}
		if !rt.dispatching.Load() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// routeAll routes a chain of the VM's messages. Consecutive messages for
// one stream's queue go to it as one run (streams.deliver).
func (rt *Runtime) routeAll(m *msg.Msg) {
	for m != nil {
		last := m
		if rt.relayTo == nil && queued(m.Kind()) {
			for n := last.Next(); n != nil && n.Stream() == m.Stream() && queued(n.Kind()); n = n.Next() {
				last = n
			}
		}
		next := last.Next()
		last.SetNext(nil)
		rt.route(m)
		m = next
	}
}

// queued says whether a message of kind goes to its stream's queue, which
// its handler reads.
func queued(kind uint32) bool {
	switch kind {
	case wire.OutLog, wire.OutReply, wire.OutUpstream, wire.OutUpstreamCancel, wire.OutCredit:
		return false
	}
	return true
}

// route routes a message, or a run of messages for one stream's queue.
func (rt *Runtime) route(m *msg.Msg) {
	defer func() {
		if p := recover(); p != nil {
			rt.log().Error("ruvoy: panic while routing a VM message", zap.Any("panic", p))
		}
	}()
	if rt.relayTo != nil && m.Kind() != wire.OutReply {
		rt.relayTo(m) // a worker: the front end routes it
		return
	}
	switch m.Kind() {
	case wire.OutLog:
		rt.logFromVM(m)
		m.Free()
	case wire.OutReply:
		rt.replies <- reply{result: uint64(m.Aux()), text: string(m.Payload())}
		m.Free()
	case wire.OutUpstream:
		rt.streams.startUpstream(m)
	case wire.OutUpstreamCancel:
		rt.streams.cancelUpstream(m)
	default:
		rt.streams.deliver(m)
	}
}

// logFromVM writes a log entry the VM thread made: a message, then
// name/value pairs; a backtrace becomes a list of lines, and a number of
// milliseconds (a name ending in _ms) a number; extra fields come first.
func (rt *Runtime) logFromVM(m *msg.Msg, extra ...zap.Field) {
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
