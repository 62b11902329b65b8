package host

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// port is the process's VM as the host drives it (ruby): CRuby through
// internal/vm (cruby.go), or, built with the tag standin, a stand-in in
// Go (standin.go), so that the request path runs and is tested without a
// Ruby. The methods are internal/vm's.
type port interface {
	Start(wire.VMConfig) error
	Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte)
	Cancel(stream uint64, flags uint32)
	Interrupt(stream uint64, reason uint32)
	Poll() *msg.Msg
	InboxFD() int
	DirectLimit(n int)
	DirectClaim(stream uint64) int
	DirectWait(line int, timeout time.Duration) *msg.Msg
	DirectRelease(line int) *msg.Msg
	ReadStats() stats.VM
	Held() (since, awake uint64)
	Now() uint64
	HoldReport(since uint64)
	ReleaseMemory()
	GCWhenIdle(d time.Duration)
	Join() int
	RubyVersion() string
	RubyPlatform() string
	BuiltABI() string

	// A worker's (relay.go).
	RelayOpen(fd int)
	RelaySend(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte)
	RelaySendMsg(m *msg.Msg)
	RelayFinish()
	RelayCounts() (admitted uint64, inflight int64)
	StartHeldReporter() int
	ForkedApp() uint64
}
