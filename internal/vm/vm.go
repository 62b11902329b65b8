// Package vm is the line between Go and the CRuby VM: the C sources of the
// VM thread, and the only Go that touches C. The VM lives on its own C
// thread; Go and that thread exchange owned messages laid out in wire.h,
// whose constants Go reads from internal/wire. The VM's messages reach
// Go as msg.Msg, whose payloads view the C memory until they are freed.
//
// The C side is compiled with the system Ruby's flags, which the build
// takes from RbConfig (build/rbconfig.sh sets CGO_CFLAGS and CGO_LDFLAGS):
// nothing here names a Ruby version or path.
package vm

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
#include <stdlib.h>
#include "vm.h"
*/
import "C"

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// cMsg is a message the VM thread made (wire.h's rv_msg), in C memory.
type cMsg = C.rv_msg

// owner gives the VM's messages' memory back (msg.Owner).
type owner struct{}

func (owner) Release(handle any) { C.rv_msg_free((*cMsg)(handle.(unsafe.Pointer))) }

// fromC makes Go messages of a list the VM sent (linked through next), in
// its order; their payloads view the C memory until they are freed.
func fromC(c *cMsg) *msg.Msg {
	var head, tail *msg.Msg
	for c != nil {
		var p []byte
		if c.len > 0 {
			p = unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c), C.RV_MSG_DATA)), int(c.len))
		}
		m := msg.View(uint32(c.kind), uint64(c.stream), uint32(c.flags), uint64(c.aux), p, owner{}, unsafe.Pointer(c))
		if tail == nil {
			head = m
		} else {
			tail.SetNext(m)
		}
		tail = m
		c = c.next
	}
	return head
}

// payloadC is a C message's bytes, to fill.
func payloadC(c *cMsg) []byte {
	if c.len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c), C.RV_MSG_DATA)), int(c.len))
}

// Start boots the VM on its own thread and returns once it serves, or with
// Ruby's error; in a worker forked from a template, whose VM serves
// already, it takes the VM over.
func Start(c wire.VMConfig) error {
	if C.rv_forked_app != 0 { // a worker forked from a template (--preload): its VM runs
		C.rv_fork_attached()
		return nil
	}
	program := C.CString(c.Program)
	defer C.free(unsafe.Pointer(program))
	argv := C.CString(strings.Join(c.Args, "\x00") + "\x00")
	defer C.free(unsafe.Pointer(argv))
	var lib strings.Builder
	for _, s := range c.RubyLib {
		lib.WriteString(s)
		lib.WriteByte(0)
	}
	clib := C.CString(lib.String())
	defer C.free(unsafe.Pointer(clib))
	cfg := C.rv_config{
		program:     program,
		argv:        argv,
		argc:        C.int(len(c.Args)),
		rubylib:     clib,
		rubylib_len: C.size_t(lib.Len()),
		max_streams: C.uint32_t(c.MaxStreams),
		window:      C.uint64_t(c.Window),
	}
	var cerr *C.char
	if C.rv_start(&cfg, &cerr) != 0 {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return errors.New(msg)
	}
	return nil
}

// ForkedApp is the app a worker forked from a template (--preload) got
// loaded with its VM; 0 in any other process.
func ForkedApp() uint64 { return uint64(C.rv_forked_app) }

// Submit copies payload into a message for the VM thread.
func Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	var p unsafe.Pointer
	if len(payload) > 0 {
		p = unsafe.Pointer(&payload[0])
	}
	C.rv_submit(C.uint32_t(kind), C.uint64_t(stream), C.uint32_t(flags), C.uint64_t(aux), p, C.size_t(len(payload)))
}

// Poll takes Go's inbox whole: every message the VM has sent, oldest
// first, or nil; then the VM writes to InboxFD when it sends the next one.
func Poll() *msg.Msg { return fromC(C.rv_out_poll()) }

// InboxFD is the eventfd of Go's inbox, which the VM writes when it sends
// to a Go side that polled and found nothing.
func InboxFD() int { return int(C.rv_out_fd()) }

// Cancel tells the VM that Go is done with a request (flags:
// wire.FlagMalformed when its body was malformed).
func Cancel(stream uint64, flags uint32) { C.rv_cancel(C.uint64_t(stream), C.uint32_t(flags)) }

// Interrupt raises in a request's fiber (0: every request's) for reason
// (wire.Intr*).
func Interrupt(stream uint64, reason uint32) {
	C.rv_interrupt_request(C.uint64_t(stream), C.uint32_t(reason))
}

// HoldReport has the VM log the backtrace of the Ruby code that has held
// its thread since since (a Now value), if it still does.
func HoldReport(since uint64) { C.rv_hold_report(C.uint64_t(since)) }

// Join waits for the VM thread to end (after wire.InStop) and returns
// ruby_cleanup's status.
func Join() int { return int(C.rv_join()) }

// ReleaseMemory gives the kernel back the free memory of malloc's arenas.
func ReleaseMemory() { C.rv_release_memory() }

// Now is the VM's clock: CLOCK_MONOTONIC in nanoseconds.
func Now() uint64 { return uint64(C.rv_monotonic_ns()) }

// figures is the VM's figures where C keeps them (rv_stats_view): Go reads
// them with atomic loads, not a cgo call, which from an idle process wakes
// Go's sysmon (it then polls every 20 µs for a while): the hold detector
// reads them every few milliseconds.
var figures = (*[unsafe.Sizeof(C.rv_vm_stats{}) / 8]uint64)(unsafe.Pointer(C.rv_stats_view()))

// field reads one of them (its offset in rv_vm_stats).
func field(offset uintptr) uint64 { return atomic.LoadUint64(&figures[offset/8]) }

// Held says since when Ruby code has held the VM thread (0: the loop has
// it) and since when the thread has been awake (0: it waits), on Now's
// clock: what the hold detector watches.
func Held() (since, awake uint64) {
	var s C.rv_vm_stats
	return field(unsafe.Offsetof(s.held_since)), field(unsafe.Offsetof(s.awake_since))
}

// ReadStats reads the VM's figures without stopping it. While Ruby code
// holds the thread the loop neither ticks nor sleeps: the figures it
// would have made are made here, so that they show the hold as it
// happens.
func ReadStats() stats.VM {
	var s C.rv_vm_stats
	v := stats.VM{
		Busy: time.Duration(field(unsafe.Offsetof(s.busy_ns))), LoopLag: time.Duration(field(unsafe.Offsetof(s.lag_ns))),
		HeldStream: field(unsafe.Offsetof(s.held_stream)), Requests: int(field(unsafe.Offsetof(s.requests))),
		Fibers: int(field(unsafe.Offsetof(s.fibers))), ResponseBytes: int64(field(unsafe.Offsetof(s.response_bytes))),
		GCCount: field(unsafe.Offsetof(s.gc_count)), GCTime: time.Duration(field(unsafe.Offsetof(s.gc_time_ns))),
		HeapLiveSlots: field(unsafe.Offsetof(s.heap_live_slots)), OffloadBusy: int(int64(field(unsafe.Offsetof(s.offload_busy)))),
		OffloadWaiting: int(int64(field(unsafe.Offsetof(s.offload_waiting)))), Hijacked: int(field(unsafe.Offsetof(s.hijacked))),
		IdleGCs: field(unsafe.Offsetof(s.gc_idle_count)), IdleGCTime: time.Duration(field(unsafe.Offsetof(s.gc_idle_ns))),
		IdleGCLongest: time.Duration(field(unsafe.Offsetof(s.gc_idle_max_ns))),
	}
	since, awake := Held()
	now := Now()
	if since != 0 && now > since {
		v.HeldFor = time.Duration(now - since)
	}
	if awake != 0 && now > awake {
		v.Busy += time.Duration(now - awake)
	}
	v.LoopLag = max(v.LoopLag, v.HeldFor)
	return v
}

// RubyVersion is the version of the libruby this binary runs.
func RubyVersion() string { return C.GoString(C.rv_ruby_version()) }

// RubyPlatform is the platform the libruby loaded was built for.
func RubyPlatform() string { return C.GoString(C.rv_ruby_platform()) }

// BuiltABI is the Ruby ABI this binary was compiled for: "3.1.0 x86_64-linux-gnu".
func BuiltABI() string { return C.GoString(C.rv_built_abi()) }

// DirectLimit sets how many handlers may wait for their own answer at once
// (DirectClaim); 0 turns it off.
func DirectLimit(n int) { C.rv_direct_limit(C.int(n)) }

// DirectClaim reserves a direct line for a request before it goes to the
// VM: from then on the VM's messages for it go to the line, not the inbox.
// It returns the line, or -1 when none is free.
func DirectClaim(stream uint64) int { return int(C.rv_direct_claim(C.uint64_t(stream))) }

// DirectWait blocks this thread until the line holds messages (returned
// oldest first, linked by Next) or timeout passes (nil). With a timeout
// of 0 it only yields its core for a moment (RV_DIRECT_SPIN_NS) and never
// sleeps.
func DirectWait(line int, timeout time.Duration) *msg.Msg {
	return fromC(C.rv_direct_wait(C.int(line), C.uint64_t(timeout)))
}

// DirectRelease gives the line back: it returns what the line still holds,
// and nil once it is free. Call it until nil.
func DirectRelease(line int) *msg.Msg { return fromC(C.rv_direct_release(C.int(line))) }

// GCWhenIdle has the VM thread run Ruby's GC once no request has been in
// flight for d (rv_gc_idle.c); 0 turns it off. Any thread may call it.
func GCWhenIdle(d time.Duration) { C.rv_gc_idle_set(C.uint64_t(max(d, 0))) }

// RelayOpen makes fd, a worker's socket to the front end, the one every
// frame the worker sends goes through (rv_relay.c); the VM reads it too
// once it gets wire.InRelay.
func RelayOpen(fd int) { C.rv_relay_open(C.int(fd)) }

// StartHeldReporter starts the thread that tells the front end when Ruby code
// holds the VM thread, and writes what a held VM sent (rv_held.c). It
// returns 0 or -errno.
func StartHeldReporter() int { return int(C.rv_held_start()) }

// RelaySend sends the front end a frame, waiting for room if need be.
func RelaySend(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	var p unsafe.Pointer
	if len(payload) > 0 {
		p = unsafe.Pointer(&payload[0])
	}
	C.rv_relay_send(C.uint32_t(kind), C.uint64_t(stream), C.uint32_t(flags), C.uint64_t(aux), p, C.size_t(len(payload)))
}

// RelaySendMsg sends the front end a VM message as a frame (an
// RV_OUT_FILE's descriptor with it) and frees it.
func RelaySendMsg(m *msg.Msg) {
	c, ok := m.Handle().(unsafe.Pointer)
	if !ok { // made in Go: the VM's own form first
		c = unsafe.Pointer(C.rv_msg_new(C.uint32_t(m.Kind()), C.uint64_t(m.Stream()), C.uint32_t(m.Flags()), C.uint64_t(m.Aux()), C.size_t(len(m.Payload()))))
		copy(payloadC((*cMsg)(c)), m.Payload())
		m.Free()
	} else {
		m.Detach()
	}
	C.rv_relay_send_msg((*cMsg)(c))
}

// RelayFinish writes what is left for the front end and shuts the
// socket's write side; later frames are dropped.
func RelayFinish() { C.rv_relay_finish() }

// relayCounts is rv_relay.c's counts, read as stats is read.
var relayCounts = (*[2]uint64)(unsafe.Pointer(C.rv_relay_counts()))

// RelayCounts are the requests the VM has read from the front end, and
// those of them it is not done with.
func RelayCounts() (admitted uint64, inflight int64) {
	return atomic.LoadUint64(&relayCounts[0]), int64(atomic.LoadUint64(&relayCounts[1]))
}
