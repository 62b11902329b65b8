//go:build standin

package host

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"

	"golang.org/x/sys/unix"
)

// The stand-in VM of the unit tests (go test -tags standin): Go code in
// the VM thread's place, so that the host and the request path
// (internal/serve: admission, streams, bodies, the responder) run as they
// do against Ruby, in milliseconds and under -race, with no Ruby built
// in. What Go sends it is recorded; control messages are answered as the
// VM answers them; a request runs the test's app, a Go function that
// answers with the messages the VM would send. The end-to-end tests
// (test/) remain the proof against the real VM.
var ruby port = Standin

// Standin is the process's stand-in VM.
var Standin = &StandIn{stopped: make(chan struct{})}

// A StandInApp serves one request: stream is its id, head what the VM
// reads. It answers through vm (vm.Send), on its own goroutine.
type StandInApp func(vm *StandIn, stream uint64, head wire.RequestHead)

// StandIn is the stand-in VM.
type StandIn struct {
	mu       sync.Mutex
	first    *msg.Msg // Go's inbox, oldest first
	last     *msg.Msg
	sleeping bool // Go polled and found nothing: the next message writes efd
	efd      int
	relayFD  int          // a worker's socket to its front end (RelayOpen)
	loading  StandInApp   // the app the next InLoadApp loads
	apps     []StandInApp // by the VM's app number, from 1
	got      []Sent       // what Go sent, in order
	stopped  chan struct{}
}

// Sent is a message Go sent the VM.
type Sent struct {
	Kind, Flags uint32
	Stream, Aux uint64
	Payload     []byte
}

// Load sets the app the next app loaded runs.
func (s *StandIn) Load(app StandInApp) {
	s.mu.Lock()
	s.loading = app
	s.mu.Unlock()
}

func (s *StandIn) Start(wire.VMConfig) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	s.efd = efd
	return err
}

func (s *StandIn) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	p := append([]byte(nil), payload...)
	s.mu.Lock()
	s.got = append(s.got, Sent{kind, flags, stream, aux, p})
	s.mu.Unlock()
	switch kind {
	case wire.InLoadApp:
		s.mu.Lock()
		s.apps = append(s.apps, s.loading)
		n := len(s.apps)
		s.mu.Unlock()
		s.Send(msg.New(wire.OutReply, 0, 0, uint64(n), 0))
	case wire.InUnloadApp, wire.InHooks, wire.InRelay: // the stand-in's apps have no hooks; it reads no socket
		s.Send(msg.New(wire.OutReply, 0, 0, 1, 0))
	case wire.InRequest:
		head, err := wire.ReadRequestHead(p)
		s.mu.Lock()
		app := s.apps[aux-1]
		s.mu.Unlock()
		if err != nil || app == nil {
			s.Send(msg.New(wire.OutReset, stream, wire.FlagEnd|wire.FlagFinal, 0, 0))
			return
		}
		go app(s, stream, head)
	case wire.InStop:
		close(s.stopped)
	}
}

// Send puts messages in Go's inbox, all in the batch Go's next poll
// takes, and wakes Go if it sleeps.
func (s *StandIn) Send(ms ...*msg.Msg) {
	s.mu.Lock()
	for _, m := range ms {
		if s.last == nil {
			s.first = m
		} else {
			s.last.SetNext(m)
		}
		s.last = m
	}
	wake := s.sleeping
	s.sleeping = false
	s.mu.Unlock()
	if wake {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(s.efd, one[:])
	}
}

// Sent is what Go sent the VM for stream (every stream: 0), in order.
func (s *StandIn) Sent(stream uint64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.got {
		if stream == 0 || m.Stream == stream {
			out = append(out, m)
		}
	}
	return out
}

func (s *StandIn) Poll() *msg.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.first
	s.first, s.last = nil, nil
	s.sleeping = m == nil
	return m
}

func (s *StandIn) InboxFD() int                       { return s.efd }
func (s *StandIn) Cancel(stream uint64, flags uint32) { s.Submit(wire.InCancel, stream, flags, 0, nil) }
func (s *StandIn) Interrupt(stream uint64, reason uint32) {
	s.Submit(wire.InInterrupt, stream, 0, uint64(reason), nil)
}
func (s *StandIn) DirectLimit(int)                        {}
func (s *StandIn) DirectClaim(uint64) int                 { return -1 }
func (s *StandIn) DirectWait(int, time.Duration) *msg.Msg { return nil }
func (s *StandIn) DirectRelease(int) *msg.Msg             { return nil }
func (s *StandIn) ReadStats() stats.VM                    { return stats.VM{} }
func (s *StandIn) Held() (uint64, uint64)                 { return 0, 0 }
func (s *StandIn) Now() uint64                            { return uint64(time.Now().UnixNano()) }
func (s *StandIn) HoldReport(uint64)                      {}
func (s *StandIn) RelayCounts() (uint64, int64)           { return 0, 0 }
func (s *StandIn) ReleaseMemory()                         {}
func (s *StandIn) GCWhenIdle(time.Duration)               {}
func (s *StandIn) Join() int                              { <-s.stopped; return 0 }
func (s *StandIn) RubyVersion() string                    { return "standin" }
func (s *StandIn) RubyPlatform() string                   { return "standin" }
func (s *StandIn) BuiltABI() string                       { return "standin" }

// responseHead is an OutHead payload (wire.h: "Response head"): the
// length (-1: none), no descriptor, the headers, then body bytes.
func responseHead(length int64, headers [][2]string, body string) []byte {
	b := make([]byte, wire.RespHeadersAt)
	binary.NativeEndian.PutUint64(b[wire.RespLengthAt:], uint64(length))
	binary.NativeEndian.PutUint32(b[wire.RespFDAt:], ^uint32(0))
	binary.NativeEndian.PutUint16(b[wire.RespCountAt:], uint16(len(headers)))
	for _, h := range headers {
		b = binary.NativeEndian.AppendUint16(b, uint16(len(h[0])))
		b = append(b, h[0]...)
		b = wire.AppendString(b, h[1])
	}
	return append(b, body...)
}

// Head sends a response head (with body bytes, and flags: wire.FlagEnd
// and wire.FlagFinal when the response is whole).
func (s *StandIn) Head(stream uint64, status int, length int64, body string, flags uint32) {
	s.Send(HeadMsg(stream, status, length, body, flags))
}

// HeadMsg is the OutHead message Head sends.
func HeadMsg(stream uint64, status int, length int64, body string, flags uint32) *msg.Msg {
	p := responseHead(length, [][2]string{{"content-type", "text/plain"}}, body)
	m := msg.New(wire.OutHead, stream, flags, uint64(status), len(p))
	copy(m.Payload(), p)
	return m
}

// Data sends body bytes.
func (s *StandIn) Data(stream uint64, body string, flags uint32) {
	m := msg.New(wire.OutData, stream, flags, 0, len(body))
	copy(m.Payload(), body)
	s.Send(m)
}

// A worker's: the stand-in writes its frames to the front end's socket
// as the VM thread would, but reads none (the worker's own Go side is
// what runs against it).
func (s *StandIn) RelayOpen(fd int) { s.relayFD = fd }
func (s *StandIn) RelaySend(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	unix.Write(s.relayFD, wire.AppendFrame(nil, kind, stream, flags, aux, payload))
}
func (s *StandIn) RelaySendMsg(m *msg.Msg) {
	s.RelaySend(m.Kind(), m.Stream(), m.Flags(), m.Aux(), m.Payload())
	m.Free()
}
func (s *StandIn) RelayFinish()           {}
func (s *StandIn) StartHeldReporter() int { return 0 }
func (s *StandIn) ForkedApp() uint64      { return 0 }
