package stats

import (
	"testing"
	"time"
)

// A worker's figures cross the socket whole, and a server's are its VMs'
// summed: counts add up, the worst lag, the shortest hold.
func TestFigures(t *testing.T) {
	a := VM{Busy: time.Second, LoopLag: 5, HeldFor: 30, HeldStream: 1, Requests: 2, Fibers: 3, ResponseBytes: 4,
		GCCount: 5, GCTime: 6, HeapLiveSlots: 7, OffloadBusy: 8, OffloadWaiting: 9, Hijacked: 10, Holds: 11, RSS: 12,
		IdleGCs: 13, IdleGCTime: 14, IdleGCLongest: 15}
	got, ok := Read(a.Append(nil))
	if !ok || got != a {
		t.Fatalf("round trip: %+v (%v)", got, ok)
	}
	if _, ok := Read(a.Append(nil)[1:]); ok {
		t.Fatal("a short payload was read")
	}
	b := VM{Busy: time.Second, LoopLag: 50, HeldFor: 20, HeldStream: 2, Requests: 1, Holds: 1, RSS: 1, IdleGCs: 1, IdleGCLongest: 20}
	s := Sum([]VM{a, b})
	if s.Busy != 2*time.Second || s.LoopLag != 50 || s.HeldFor != 20 || s.HeldStream != 2 || s.Requests != 3 || s.Holds != 12 || s.RSS != 13 ||
		s.IdleGCs != 14 || s.IdleGCLongest != 20 {
		t.Fatalf("sum: %+v", s)
	}
	if Sum(nil) != (VM{}) || Sum([]VM{a}) != a {
		t.Fatal("sum of none or one")
	}
}
