package ruvoy

import (
	"github.com/ruvoy/ruvoy/internal/vm"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A vmLink is the way to the VM a request runs in: this process's own
// (localVM), or a worker process's in cluster mode (*worker, pool.go).
// What a request sends its VM goes through its stream's link.
type vmLink interface {
	// start hands the VM a new request (aux: the app it runs in); false
	// when the VM is gone and the request never reached it.
	start(stream, app uint64, head []byte) bool
	submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte)
	cancel(stream uint64, flags uint32)
	interrupt(stream uint64, reason uint32)
	// hijacked hands the VM the descriptor of a hijacked connection
	// (wire.InHijacked); the VM owns it from then on.
	hijacked(stream uint64, fd int, flags uint32)
}

// localVM is the VM of this process.
type localVM struct{}

func (localVM) start(stream, app uint64, head []byte) bool {
	vm.Submit(wire.InRequest, stream, 0, app, head)
	return true
}

func (localVM) submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	vm.Submit(kind, stream, flags, aux, payload)
}

func (localVM) cancel(stream uint64, flags uint32)     { vm.Cancel(stream, flags) }
func (localVM) interrupt(stream uint64, reason uint32) { vm.Interrupt(stream, reason) }
func (localVM) hijacked(stream uint64, fd int, flags uint32) {
	vm.Submit(wire.InHijacked, stream, flags, uint64(fd), nil)
}
