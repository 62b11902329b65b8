package serve

import (
	"github.com/ruvoy/ruvoy/internal/host"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A vmLink is the way to the VM a request runs in: this process's own
// (localVM), or a worker process's in cluster mode (*frontend.Handle).
// What a request sends its VM goes through its link.
type vmLink interface {
	// Start hands the VM a new request (app: the app it runs in); false
	// when the VM is gone and the request never reached it.
	Start(stream, app uint64, head []byte) bool
	Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte)
	Cancel(stream uint64, flags uint32)
	Interrupt(stream uint64, reason uint32)
	// Hijacked hands the VM the descriptor of a hijacked connection
	// (wire.InHijacked); the VM owns it from then on.
	Hijacked(stream uint64, fd int, flags uint32)
}

// localVM is the VM of this process.
type localVM struct{ *host.VM }

func (l localVM) Start(stream, app uint64, head []byte) bool {
	l.Submit(wire.InRequest, stream, 0, app, head)
	return true
}

func (l localVM) Hijacked(stream uint64, fd int, flags uint32) {
	l.Submit(wire.InHijacked, stream, flags, uint64(fd), nil)
}
