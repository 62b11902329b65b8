//go:build standin

package worker

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/stats"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// A worker's Go side against the stand-in VM (go test -tags standin
// ./internal/cluster/worker): it reads its settings from the front end's
// socket, boots, says it is ready, reports its figures, and stops when
// the urgent socket says so, with exit status 0. The end-to-end cluster
// tests prove the same against Ruby, requests and all.
func TestWorkerRunsAndStops(t *testing.T) {
	// The worker's two sockets are two descriptors in a row (fd, fd+1).
	front, main := socketPair(t)
	urgentFront, urgent := socketPair(t)
	const fd = 200
	for i, s := range []int{main, urgent} {
		if err := syscall.Dup2(s, fd+i); err != nil {
			t.Fatal(err)
		}
		syscall.Close(s)
	}
	cfg, _ := json.Marshal(cluster.Config{Slot: 3, Program: "ruvoy", Rackup: "config.ru", Environment: "test",
		HoldWarn: time.Second, ResponseWindow: 1 << 16})
	if _, err := front.Write(wire.AppendFrame(nil, wire.WorkerConfig, 0, 0, 0, cfg)); err != nil {
		t.Fatal(err)
	}
	exit := make(chan int, 1)
	go func() { exit <- Run(fd) }()

	in := bufio.NewReader(front)
	var hdr [wire.FrameHeader]byte
	next := func() (wire.Frame, []byte) {
		t.Helper()
		front.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := wire.ReadFrame(in, &hdr)
		if err != nil {
			t.Fatalf("reading the worker's frames: %v", err)
		}
		p := make([]byte, f.Len)
		if _, err := io.ReadFull(in, p); err != nil {
			t.Fatal(err)
		}
		return f, p
	}
	if f, p := next(); f.Kind != wire.WorkerReady || f.Aux != 1 {
		t.Fatalf("first frame: kind %d aux %d %q, want ready (1)", f.Kind, f.Aux, p)
	}
	f, p := next()
	s, ok := stats.Read(p)
	if f.Kind != wire.WorkerStats || !ok || s.RSS == 0 {
		t.Fatalf("second frame: kind %d, figures %+v (%v), want the worker's figures with its memory", f.Kind, s, ok)
	}
	if _, err := urgentFront.Write(wire.AppendFrame(nil, wire.InStop, 0, 0, 0, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit status %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop within 10 s of the urgent stop")
	}
}

// socketPair is a unix stream socket pair: an *os.File for the test's end,
// the descriptor of the worker's.
func socketPair(t *testing.T) (*os.File, int) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "front")
	t.Cleanup(func() { f.Close() })
	return f, fds[1]
}
