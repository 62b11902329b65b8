package host

import (
	"os"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// dispatch is the one goroutine that takes the VM's messages: it drains
// Go's inbox whole, hands the chain to the router, and sleeps on the
// inbox's eventfd (in Go's netpoller, holding no thread) only when the
// inbox is empty, so a busy VM costs no syscall per message.
func (v *VM) dispatch() {
	wake := os.NewFile(uintptr(ruby.InboxFD()), "ruvoy-go-inbox")
	var buf [8]byte
	for {
		v.dispatching.Store(true)
		m := ruby.Poll()
		if m == nil {
			v.dispatching.Store(false)
			if _, err := wake.Read(buf[:]); err != nil {
				v.Log().Error("ruvoy: reading the VM's wakeup descriptor failed", zap.Error(err))
			}
			continue
		}
		v.route(m)
	}
}

// drain routes what the VM sent as it stopped (its shutdown hooks' log
// lines) before the process goes on to exit: once the inbox is empty and
// the dispatcher holds none of it, or after wait.
func (v *VM) drain(wait time.Duration) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		if m := ruby.Poll(); m != nil {
			v.route(m)
			continue
		}
		if !v.dispatching.Load() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// route hands a chain of the VM's messages to the router, but the answers
// to control messages, which go to the control exchange waiting for
// them; all in their order (a boot's log lines before its answer).
func (v *VM) route(m *msg.Msg) {
	for m != nil {
		run := m
		for m.Kind() != wire.OutReply && m.Next() != nil && m.Next().Kind() != wire.OutReply {
			m = m.Next()
		}
		next := m.Next()
		m.SetNext(nil)
		if run.Kind() == wire.OutReply {
			v.replies <- reply{result: uint64(run.Aux()), text: string(run.Payload())}
			run.Free()
		} else {
			v.router.Route(run)
		}
		m = next
	}
}
