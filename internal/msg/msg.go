// Package msg is the messages a VM sends Go, as Go code sees them: a
// plain Go type, whatever made them. internal/vm turns the VM thread's
// messages (C memory, wire.h's rv_msg) into these without copying their
// bytes; a worker's front end reads them from its socket; tests make
// their own. Whoever holds a message owns it until Free.
package msg

import "sync"

// A Msg is one message: its kind (wire.Out*), flags (wire.Flag*, or a log
// level), the stream (request) it belongs to (0: none), the kind's one
// number (a status, a byte count, a call id), and its payload.
type Msg struct {
	kind, flags uint32
	stream, aux uint64
	payload     []byte
	next        *Msg
	owner       Owner // whose memory payload views; nil: Go's
	handle      any   // the owner's own reference to that memory
}

// An Owner is whoever holds the memory a message's payload views: the VM
// (internal/vm), which gets it back when the message is freed.
type Owner interface {
	Release(handle any)
}

var spare = sync.Pool{New: func() any { return new(Msg) }}

// New makes a message with n payload bytes of Go memory (filled through
// Payload).
func New(kind uint32, stream uint64, flags uint32, aux uint64, n int) *Msg {
	m := spare.Get().(*Msg)
	m.kind, m.stream, m.flags, m.aux = kind, stream, flags, aux
	if n > 0 {
		m.payload = make([]byte, n)
	}
	return m
}

// View makes a message whose payload is memory owner holds (handle is the
// owner's reference to it): it is given back to the owner at Free.
func View(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte, owner Owner, handle any) *Msg {
	m := spare.Get().(*Msg)
	m.kind, m.stream, m.flags, m.aux, m.payload = kind, stream, flags, aux, payload
	m.owner, m.handle = owner, handle
	return m
}

func (m *Msg) Kind() uint32   { return m.kind }
func (m *Msg) Flags() uint32  { return m.flags }
func (m *Msg) Stream() uint64 { return m.stream }
func (m *Msg) Aux() uint64    { return m.aux }

// Payload is the message's bytes, valid until Free.
func (m *Msg) Payload() []byte { return m.payload }

// Next is the message after m in a list; SetNext links n after m.
func (m *Msg) Next() *Msg     { return m.next }
func (m *Msg) SetNext(n *Msg) { m.next = n }

// Handle is the owner's reference to the payload's memory, or nil.
func (m *Msg) Handle() any { return m.handle }

// Free gives the payload's memory back to its owner; m may not be used
// after it.
func (m *Msg) Free() {
	if m.owner != nil {
		m.owner.Release(m.handle)
	}
	*m = Msg{}
	spare.Put(m)
}

// Detach takes the payload's memory from m for its owner, who now answers
// for it (it travels on in the owner's own form), and frees m.
func (m *Msg) Detach() any {
	h := m.handle
	m.owner = nil
	m.Free()
	return h
}
