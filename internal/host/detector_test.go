package host

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testVM is a VM whose thread a test holds and lets go: Held reads the
// hold's start on the real clock.
type testVM struct {
	mu      sync.Mutex
	since   uint64
	reports []uint64
}

func (v *testVM) Held() (uint64, uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.since, v.since
}
func (v *testVM) Now() uint64 { return uint64(time.Now().UnixNano()) }
func (v *testVM) HoldReport(since uint64) {
	v.mu.Lock()
	v.reports = append(v.reports, since)
	v.mu.Unlock()
}
func (v *testVM) hold(on bool) {
	v.mu.Lock()
	v.since = 0
	if on {
		v.since = uint64(time.Now().UnixNano())
	}
	v.mu.Unlock()
}
func (v *testVM) reported() []uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]uint64(nil), v.reports...)
}

// A hold past the warning is reported once, however long it lasts, and
// the next hold again; one shorter than the warning never; past the
// limit, OnLimit is called.
func TestDetectorReportsEachHoldOnce(t *testing.T) {
	v := &testVM{}
	var holds, limits atomic.Int64
	w := &detector{VM: v, OnHold: func() { holds.Add(1) }, OnLimit: func(uint64, time.Duration) { limits.Add(1) }}
	w.Warn.Store(int64(50 * time.Millisecond))
	go w.run()

	v.hold(true) // short: let go before the warning
	time.Sleep(10 * time.Millisecond)
	v.hold(false)
	time.Sleep(100 * time.Millisecond)
	if n := holds.Load(); n != 0 {
		t.Fatalf("a 10 ms hold was reported (%d)", n)
	}
	for i := 1; i <= 2; i++ {
		v.hold(true)
		waitFor(t, func() bool { return holds.Load() == int64(i) })
		time.Sleep(200 * time.Millisecond) // still held: no second report
		v.hold(false)
		if n := holds.Load(); n != int64(i) || len(v.reported()) != i {
			t.Fatalf("hold %d: %d reports, %d backtraces asked, want %d", i, n, len(v.reported()), i)
		}
	}
	if limits.Load() != 0 {
		t.Fatal("OnLimit without a limit")
	}
	w.Limit.Store(int64(100 * time.Millisecond))
	v.hold(true)
	waitFor(t, func() bool { return limits.Load() > 0 })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 10 s")
		}
	}
}
