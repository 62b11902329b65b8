//go:build standin

package host

import (
	"sync"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// The host against the stand-in VM (go test -tags standin
// ./internal/host): control exchanges, what reaches the router and in
// which order, and the stop.

// recorder is a Router that keeps what it is given.
type recorder struct {
	mu   sync.Mutex
	got  []*msg.Msg
	seen func(m *msg.Msg) // called for each message as it comes, if set
}

func (r *recorder) Route(m *msg.Msg) {
	for m != nil {
		next := m.Next()
		m.SetNext(nil)
		if r.seen != nil {
			r.seen(m)
		}
		r.mu.Lock()
		r.got = append(r.got, m)
		r.mu.Unlock()
		m = next
	}
}

func (r *recorder) Describe(uint64) (string, string, bool) { return "GET", "/held", true }

func (r *recorder) kinds() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint32
	for _, m := range r.got {
		out = append(out, m.Kind())
	}
	return out
}

// A chain of the VM's messages reaches the router in its order, and an
// answer to a control message goes to the exchange waiting for it only
// after what came before it was routed (a boot's log lines before its
// answer): nothing of it reaches the router.
func TestRouteKeepsOrderAroundReplies(t *testing.T) {
	r := &recorder{}
	v := New(Config{}, r)
	chain := []*msg.Msg{
		msg.New(wire.OutLog, 0, wire.LogInfo, 0, 0),
		msg.New(wire.OutData, 7, 0, 0, 0),
		msg.New(wire.OutReply, 0, 0, 42, 0),
		msg.New(wire.OutHead, 9, 0, 200, 0),
	}
	for i := range chain[:len(chain)-1] {
		chain[i].SetNext(chain[i+1])
	}
	repliedBefore := map[uint32]bool{}
	r.seen = func(m *msg.Msg) { repliedBefore[m.Kind()] = len(v.replies) > 0 }
	v.route(chain[0])
	if got := r.kinds(); len(got) != 3 || got[0] != wire.OutLog || got[1] != wire.OutData || got[2] != wire.OutHead {
		t.Fatalf("routed %v, want log, data, head", got)
	}
	if repliedBefore[wire.OutLog] || repliedBefore[wire.OutData] || !repliedBefore[wire.OutHead] {
		t.Fatalf("the reply came out of order: %v (true: after the reply)", repliedBefore)
	}
	if rep := <-v.replies; rep.result != 42 {
		t.Fatalf("reply %d, want 42", rep.result)
	}
}

// The VM boots once, answers control messages (an app's number, its boot
// hooks), reports figures, sends what it sends to the router, and stops
// once: with 0 when no request was cut short, whenever asked again.
func TestVMLifecycle(t *testing.T) {
	r := &recorder{}
	v := New(Config{Program: "test"}, r)
	if v.Booted() || v.Stats().Busy != 0 {
		t.Fatal("booted before Boot")
	}
	if err := v.Boot(); err != nil {
		t.Fatal(err)
	}
	if err := v.Boot(); err != nil || !v.Booted() {
		t.Fatalf("a second Boot: %v, booted %v", err, v.Booted())
	}
	app, text := v.LoadApp("config.ru", "test", "")
	if app == 0 {
		t.Fatalf("LoadApp: %q", text)
	}
	if text, ok := v.WorkerBoot(0); !ok {
		t.Fatalf("WorkerBoot: %q", text)
	}
	v.SetHoldWarn(time.Second)
	if v.HoldWarn() != time.Second || v.HoldLimit() != 0 {
		t.Fatalf("hold settings %v %v", v.HoldWarn(), v.HoldLimit())
	}
	// What the VM sends reaches the router through the dispatcher.
	Standin.Data(5, "x", wire.FlagEnd)
	for deadline := time.Now().Add(5 * time.Second); len(r.kinds()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher routed nothing in 5 s")
		}
	}
	if k := r.kinds(); k[0] != wire.OutData {
		t.Fatalf("routed %v", k)
	}
	if code, cut := v.Stop(); code != 0 || cut != 0 {
		t.Fatalf("Stop: %d, %d cut", code, cut)
	}
	if code, _ := v.Stop(); code != 0 {
		t.Fatalf("a second Stop: %d", code)
	}
	if got := Standin.Sent(0); got[len(got)-1].Kind != wire.InStop {
		t.Fatalf("the VM was not told to stop: last sent %d", got[len(got)-1].Kind)
	}
}
