//go:build standin

package ruvoy

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"

	"golang.org/x/sys/unix"
)

// The stand-in VM of the unit tests (go test -tags standin .): Go code in
// the VM thread's place, so that admission, streams, bodies and the
// responder run as they do against Ruby, in milliseconds and under -race.
// What Go sends it is recorded; control messages are answered as the VM
// answers them; a request runs the test's app, a Go function that
// answers with the messages the VM would send. The end-to-end tests
// (test/) remain the proof against the real VM.
var ruby vmPort = standin

var standin = &standIn{stopped: make(chan struct{})}

// A standInApp serves one request: stream is its id, head what the VM
// reads. It answers through vm (vm.send), on its own goroutine.
type standInApp func(vm *standIn, stream uint64, head wire.RequestHead)

type standIn struct {
	mu       sync.Mutex
	first    *msg.Msg // Go's inbox, oldest first
	last     *msg.Msg
	sleeping bool // Go polled and found nothing: the next message writes efd
	efd      int
	loading  standInApp   // the app the next InLoadApp loads
	apps     []standInApp // by the VM's app number, from 1
	got      []standInMsg // what Go sent, in order
	stopped  chan struct{}
}

// standInMsg is a message Go sent the VM.
type standInMsg struct {
	kind, flags uint32
	stream, aux uint64
	payload     []byte
}

func (s *standIn) Start(vmConfig) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	s.efd = efd
	return err
}

func (s *standIn) Submit(kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) {
	p := append([]byte(nil), payload...)
	s.mu.Lock()
	s.got = append(s.got, standInMsg{kind, flags, stream, aux, p})
	s.mu.Unlock()
	switch kind {
	case wire.InLoadApp:
		s.mu.Lock()
		s.apps = append(s.apps, s.loading)
		n := len(s.apps)
		s.mu.Unlock()
		s.send(msg.New(wire.OutReply, 0, 0, uint64(n), 0))
	case wire.InUnloadApp, wire.InHooks: // the stand-in's apps have no hooks
		s.send(msg.New(wire.OutReply, 0, 0, 1, 0))
	case wire.InRequest:
		head, err := wire.ReadRequestHead(p)
		s.mu.Lock()
		app := s.apps[aux-1]
		s.mu.Unlock()
		if err != nil || app == nil {
			s.send(msg.New(wire.OutReset, stream, wire.FlagEnd|wire.FlagFinal, 0, 0))
			return
		}
		go app(s, stream, head)
	case wire.InStop:
		close(s.stopped)
	}
}

// send puts messages in Go's inbox, all in the batch Go's next poll
// takes, and wakes Go if it sleeps.
func (s *standIn) send(ms ...*msg.Msg) {
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

// sent is what Go sent the VM for stream (every stream: 0), in order.
func (s *standIn) sent(stream uint64) []standInMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []standInMsg
	for _, m := range s.got {
		if stream == 0 || m.stream == stream {
			out = append(out, m)
		}
	}
	return out
}

func (s *standIn) Poll() *msg.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.first
	s.first, s.last = nil, nil
	s.sleeping = m == nil
	return m
}

func (s *standIn) InboxFD() int                       { return s.efd }
func (s *standIn) Cancel(stream uint64, flags uint32) { s.Submit(wire.InCancel, stream, flags, 0, nil) }
func (s *standIn) Interrupt(stream uint64, reason uint32) {
	s.Submit(wire.InInterrupt, stream, 0, uint64(reason), nil)
}
func (s *standIn) DirectLimit(int)                        {}
func (s *standIn) DirectClaim(uint64) int                 { return -1 }
func (s *standIn) DirectWait(int, time.Duration) *msg.Msg { return nil }
func (s *standIn) DirectRelease(int) *msg.Msg             { return nil }
func (s *standIn) ReadStats() vmReading                   { return vmReading{} }
func (s *standIn) Now() uint64                            { return uint64(time.Now().UnixNano()) }
func (s *standIn) HoldReport(uint64)                      {}
func (s *standIn) RelayCounts() (uint64, int64)           { return 0, 0 }
func (s *standIn) ReleaseMemory()                         {}
func (s *standIn) Join() int                              { <-s.stopped; return 0 }
func (s *standIn) RubyVersion() string                    { return "standin" }
func (s *standIn) RubyPlatform() string                   { return "standin" }
func (s *standIn) BuiltABI() string                       { return "standin" }

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

// head sends a response head (with body bytes, and flags: wire.FlagEnd
// and wire.FlagFinal when the response is whole).
func (s *standIn) head(stream uint64, status int, length int64, body string, flags uint32) {
	s.send(headMsg(stream, status, length, body, flags))
}

func headMsg(stream uint64, status int, length int64, body string, flags uint32) *msg.Msg {
	p := responseHead(length, [][2]string{{"content-type", "text/plain"}}, body)
	m := msg.New(wire.OutHead, stream, flags, uint64(status), len(p))
	copy(m.Payload(), p)
	return m
}

// data sends body bytes.
func (s *standIn) data(stream uint64, body string, flags uint32) {
	m := msg.New(wire.OutData, stream, flags, 0, len(body))
	copy(m.Payload(), body)
	s.send(m)
}
