//go:build !standin

package ruvoy

import (
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/vm"
)

// ruby is the process's VM: CRuby, through internal/vm (cgo).
var ruby vmPort = cruby{}

type cruby struct{}

func (cruby) Start(c vmConfig) error {
	return vm.Start(vm.Config{Program: c.Program, Args: c.Args, RubyLib: c.RubyLib, MaxStreams: c.MaxStreams, Window: c.Window})
}

func (cruby) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	vm.Submit(kind, stream, flags, aux, payload)
}

func (cruby) Cancel(stream uint64, flags uint32)     { vm.Cancel(stream, flags) }
func (cruby) Interrupt(stream uint64, reason uint32) { vm.Interrupt(stream, reason) }
func (cruby) Poll() *msg.Msg                         { return vm.Poll() }
func (cruby) InboxFD() int                           { return vm.InboxFD() }
func (cruby) DirectLimit(n int)                      { vm.DirectLimit(n) }
func (cruby) DirectClaim(stream uint64) int          { return vm.DirectClaim(stream) }
func (cruby) DirectWait(slot int, timeout time.Duration) *msg.Msg {
	return vm.DirectWait(slot, timeout)
}
func (cruby) DirectRelease(slot int) *msg.Msg { return vm.DirectRelease(slot) }
func (cruby) ReadStats() vmReading            { return vmReading(vm.ReadStats()) }
func (cruby) Now() uint64                     { return vm.Now() }
func (cruby) HoldReport(since uint64)         { vm.HoldReport(since) }
func (cruby) RelayCounts() (uint64, int64)    { return vm.RelayCounts() }
func (cruby) ReleaseMemory()                  { vm.ReleaseMemory() }
func (cruby) Join() int                       { return vm.Join() }
func (cruby) RubyVersion() string             { return vm.RubyVersion() }
func (cruby) RubyPlatform() string            { return vm.RubyPlatform() }
func (cruby) BuiltABI() string                { return vm.BuiltABI() }
