package ruvoy

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
)

// vmPort is the process's VM as the runtime drives it (ruby): CRuby
// through internal/vm (ruby.go), or, in the unit tests built with the tag
// standin, a stand-in in Go (standin_test.go), so that the request path
// runs and is tested without a Ruby. The methods are internal/vm's.
type vmPort interface {
	Start(vmConfig) error
	Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte)
	Cancel(stream uint64, flags uint32)
	Interrupt(stream uint64, reason uint32)
	Poll() *msg.Msg
	InboxFD() int
	DirectLimit(n int)
	DirectClaim(stream uint64) int
	DirectWait(slot int, timeout time.Duration) *msg.Msg
	DirectRelease(slot int) *msg.Msg
	ReadStats() vmReading
	Now() uint64
	HoldReport(since uint64)
	RelayCounts() (admitted uint64, inflight int64)
	ReleaseMemory()
	Join() int
	RubyVersion() string
	RubyPlatform() string
	BuiltABI() string
}

// vmConfig is what the VM boots with.
type vmConfig struct {
	Program    string   // $0
	Args       []string // ARGV
	RubyLib    []string // the embedded Ruby library: name, source, name, source...
	MaxStreams uint32   // streams the VM keeps room for: the admission limit
	Window     uint64   // response bytes in flight per stream
}

// vmReading is the VM's figures as it keeps them (nanoseconds, counts):
// VMStats is made of them.
type vmReading struct {
	BusyNS, AwakeSince, LagNS, HeldSince, HeldStream uint64
	Requests, Fibers, ResponseBytes                  uint64
	GCCount, GCTimeNS, HeapLiveSlots                 uint64
	OffloadBusy, OffloadWaiting, Hijacked            uint64
}
