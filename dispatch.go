package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import (
	"encoding/binary"
	"os"
	"strings"
	"unsafe"

	"go.uber.org/zap"
)

// dispatch is the one goroutine that takes the VM's messages: it drains the
// VM's outbox whole, hands each message to its request's stream, and sleeps
// on the outbox eventfd (in Go's netpoller, holding no thread) only when the
// outbox is empty, so a busy VM costs no syscall per message.
func (rt *Runtime) dispatch() {
	wake := os.NewFile(uintptr(C.rv_out_fd()), "ruvoy-outbox")
	var buf [8]byte
	for {
		m := C.rv_out_poll()
		if m == nil {
			if _, err := wake.Read(buf[:]); err != nil {
				rt.log().Error("ruvoy: reading the VM's wakeup descriptor failed", zap.Error(err))
			}
			continue
		}
		for m != nil {
			next := m.next
			rt.route(m)
			m = next
		}
	}
}

func (rt *Runtime) route(m *C.rv_msg) {
	defer func() {
		if p := recover(); p != nil {
			rt.log().Error("ruvoy: panic while routing a VM message", zap.Any("panic", p))
		}
	}()
	switch m.kind {
	case C.RV_OUT_LOG:
		rt.logFromVM(m)
		freeMsg(m)
	case C.RV_OUT_REPLY:
		rt.replies <- reply{result: uint64(m.aux), text: string(payload(m))}
		freeMsg(m)
	case C.RV_OUT_UPSTREAM:
		rt.slots.startUpstream(m)
	case C.RV_OUT_UPSTREAM_CANCEL:
		rt.slots.cancelUpstream(m)
	default:
		rt.slots.deliver(m)
	}
}

// logFromVM writes a log entry the VM thread made: a message, then
// name/value pairs; a backtrace becomes a list of lines.
func (rt *Runtime) logFromVM(m *C.rv_msg) {
	parts := splitStrings(payload(m))
	if len(parts) == 0 {
		return
	}
	fields := make([]zap.Field, 0, len(parts)/2+2)
	if m.stream != 0 {
		if method, path, ok := rt.slots.describe(uint64(m.stream)); ok {
			fields = append(fields, zap.String("method", method), zap.String("path", path))
		}
	}
	for i := 1; i+1 < len(parts); i += 2 {
		if parts[i] == "backtrace" {
			fields = append(fields, zap.Strings(parts[i], strings.Split(parts[i+1], "\n")))
		} else {
			fields = append(fields, zap.String(parts[i], parts[i+1]))
		}
	}
	switch m.flags {
	case C.RV_LOG_DEBUG:
		rt.log().Debug(parts[0], fields...)
	case C.RV_LOG_INFO:
		rt.log().Info(parts[0], fields...)
	case C.RV_LOG_WARN:
		rt.log().Warn(parts[0], fields...)
	default:
		rt.log().Error(parts[0], fields...)
	}
}

// payload views a message's bytes; valid until the message is freed.
func payload(m *C.rv_msg) []byte {
	if m.len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(m), C.RV_MSG_DATA)), int(m.len))
}

func freeMsg(m *C.rv_msg) { C.rv_msg_free(m) }

// splitStrings decodes u32-length-prefixed strings.
func splitStrings(b []byte) []string {
	var out []string
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint32(b))
		b = b[4:]
		if n > len(b) {
			break
		}
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	return out
}
