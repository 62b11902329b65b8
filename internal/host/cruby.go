//go:build !standin

package host

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/vm"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// ruby is the process's VM: CRuby, through internal/vm (cgo).
var ruby port = cruby{}

type cruby struct{}

func (cruby) Start(c wire.VMConfig) error { return vm.Start(c) }
func (cruby) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	vm.Submit(kind, stream, flags, aux, payload)
}
func (cruby) Cancel(stream uint64, flags uint32)     { vm.Cancel(stream, flags) }
func (cruby) Interrupt(stream uint64, reason uint32) { vm.Interrupt(stream, reason) }
func (cruby) Poll() *msg.Msg                         { return vm.Poll() }
func (cruby) InboxFD() int                           { return vm.InboxFD() }
func (cruby) DirectLimit(n int)                      { vm.DirectLimit(n) }
func (cruby) DirectClaim(stream uint64) int          { return vm.DirectClaim(stream) }
func (cruby) DirectWait(line int, timeout time.Duration) *msg.Msg {
	return vm.DirectWait(line, timeout)
}
func (cruby) DirectRelease(line int) *msg.Msg { return vm.DirectRelease(line) }
func (cruby) ReadStats() stats.VM             { return vm.ReadStats() }
func (cruby) Held() (uint64, uint64)          { return vm.Held() }
func (cruby) Now() uint64                     { return vm.Now() }
func (cruby) HoldReport(since uint64)         { vm.HoldReport(since) }
func (cruby) ReleaseMemory()                  { vm.ReleaseMemory() }
func (cruby) GCWhenIdle(d time.Duration)      { vm.GCWhenIdle(d) }
func (cruby) Join() int                       { return vm.Join() }
func (cruby) RubyVersion() string             { return vm.RubyVersion() }
func (cruby) RubyPlatform() string            { return vm.RubyPlatform() }
func (cruby) BuiltABI() string                { return vm.BuiltABI() }
func (cruby) RelayOpen(fd int)                { vm.RelayOpen(fd) }
func (cruby) RelaySend(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	vm.RelaySend(kind, stream, flags, aux, payload)
}
func (cruby) RelaySendMsg(m *msg.Msg)      { vm.RelaySendMsg(m) }
func (cruby) RelayFinish()                 { vm.RelayFinish() }
func (cruby) RelayCounts() (uint64, int64) { return vm.RelayCounts() }
func (cruby) StartHeldReporter() int       { return vm.StartHeldReporter() }
func (cruby) ForkedApp() uint64            { return vm.ForkedApp() }
