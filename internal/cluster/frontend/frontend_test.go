package frontend

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// pool makes a pool of workers that are only the front end's view of
// them: no process behind, for the balancing's own tests.
func pool(n int) (*Pool, []*Handle) {
	p := &Pool{slots: make([]atomic.Pointer[Handle], MaxWorkers), slotSt: make([]slotState, MaxWorkers)}
	p.size.Store(int32(n))
	var ws []*Handle
	for i := range n {
		w := &Handle{pool: p, slot: i}
		p.slots[i].Store(w)
		ws = append(ws, w)
	}
	return p, ws
}

// A pool shrinks from its last slot, whose worker no request picks once
// it retires (it stops when its requests end), and never below one.
func TestShrink(t *testing.T) {
	p, ws := pool(3)
	for _, w := range ws {
		w.inflight.Store(1) // retiring, it drains: no stop yet
	}
	ws[0].inflight.Store(9)
	ws[1].inflight.Store(9)
	for want := 2; want >= 1; want-- {
		if n, err := p.Shrink(); n != want || err != nil {
			t.Fatalf("Shrink: %d, %v; want %d", n, err, want)
		}
		if !ws[want].retiring.Load() {
			t.Fatalf("the worker of slot %d does not retire", want)
		}
		for range 10 {
			if w := p.Pick(); w.slot >= want {
				t.Fatalf("slot %d picked in a pool of %d", w.slot, want)
			}
		}
	}
	if n, err := p.Shrink(); n != 1 || err == nil {
		t.Fatalf("below one worker: %d, %v", n, err)
	}
	var seen []int
	p.Each(func(slot int, _ *Handle, _ int64) { seen = append(seen, slot) })
	if len(seen) != 1 {
		t.Fatalf("Each saw slots %v of a pool of one", seen)
	}
}

// A request goes to the worker with the fewest requests in flight; ties
// go round; a held worker only when every worker is held (the shortest
// held first), a silent one (not reporting) after those; a retiring or
// gone one never.
func TestPick(t *testing.T) {
	p, ws := pool(3)
	ws[0].inflight.Store(5)
	ws[1].inflight.Store(2)
	ws[2].inflight.Store(9)
	if w := p.Pick(); w != ws[1] {
		t.Fatalf("fewest in flight: got worker %d", w.slot)
	}
	ws[1].heldSince.Store(time.Now().UnixNano())
	if w := p.Pick(); w != ws[0] {
		t.Fatalf("with worker 1 held: got worker %d", w.slot)
	}
	ws[0].heldSince.Store(time.Now().Add(-time.Second).UnixNano())
	ws[2].heldSince.Store(time.Now().Add(-time.Minute).UnixNano())
	if w := p.Pick(); w != ws[1] {
		t.Fatalf("all held: got worker %d, want the one held the shortest", w.slot)
	}
	for _, w := range ws {
		w.heldSince.Store(0)
		w.inflight.Store(0)
	}
	ws[0].silent.Store(true)
	ws[1].heldSince.Store(time.Now().UnixNano())
	ws[2].retiring.Store(true)
	if w := p.Pick(); w != ws[1] {
		t.Fatalf("silent, held, retiring: got worker %d, want the held one before the silent one", w.slot)
	}
	ws[1].gone.Store(true)
	if w := p.Pick(); w != ws[0] {
		t.Fatalf("only a silent one left: got %v", w)
	}
	ws[0].gone.Store(true)
	if w := p.Pick(); w != nil {
		t.Fatalf("none serving: got worker %d", w.slot)
	}
	// Ties go round.
	p, ws = pool(3)
	seen := map[int]int{}
	for range 300 {
		seen[p.Pick().slot]++
	}
	for i := range ws {
		if seen[i] != 100 {
			t.Fatalf("equal workers picked %v times", seen)
		}
	}
}

// Many senders at once, whose batches one of them writes: every frame
// arrives whole and each sender's in its order; a descriptor arrives with
// its frame, in order.
func TestFrameWriterBatches(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "end")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	ours, theirs := conn(fds[0]), conn(fds[1])
	defer theirs.Close()
	fw := newFrameWriter(ours)
	const senders, each, files = 16, 500, 40
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				fw.send(wire.OutData, uint64(s), 0, uint64(i), []byte(fmt.Sprintf("%d:%d", s, i)))
			}
		}()
	}
	wg.Add(1)
	go func() { // files: each frame's descriptor, a pipe whose other end names it
		defer wg.Done()
		for i := range files {
			r, w, _ := os.Pipe()
			fmt.Fprintf(w, "file %d", i)
			w.Close()
			fd, _ := syscall.Dup(int(r.Fd()))
			r.Close()
			fw.addFile(wire.Frame{Kind: wire.OutFile, Stream: 99, Aux: uint64(i)}, nil, fd)
			fw.flush()
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); fw.finish(); close(done) }()

	fr := newFrameReader(theirs)
	in := bufio.NewReader(fr)
	next := map[uint64]uint64{}
	var hdr [wire.FrameHeader]byte
	frames := 0
	for {
		f, err := wire.ReadFrame(in, &hdr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, f.Len)
		if _, err := io.ReadFull(in, p); err != nil {
			t.Fatal(err)
		}
		frames++
		if f.Stream == 99 {
			fd := fr.takeFD()
			if fd < 0 {
				t.Fatalf("file frame %d came without its descriptor", f.Aux)
			}
			b := make([]byte, 32)
			n, _ := syscall.Read(fd, b)
			syscall.Close(fd)
			if got, want := string(b[:n]), fmt.Sprintf("file %d", f.Aux); got != want {
				t.Fatalf("file frame %d's descriptor reads %q", f.Aux, got)
			}
			continue
		}
		if f.Aux != next[f.Stream] || string(p) != fmt.Sprintf("%d:%d", f.Stream, f.Aux) {
			t.Fatalf("sender %d: frame %d (%q) where %d was next", f.Stream, f.Aux, p, next[f.Stream])
		}
		next[f.Stream]++
	}
	<-done
	if frames != senders*each+files {
		t.Fatalf("%d frames, want %d", frames, senders*each+files)
	}
	if fd := fr.takeFD(); fd >= 0 {
		t.Fatalf("a descriptor left over")
	}
}
