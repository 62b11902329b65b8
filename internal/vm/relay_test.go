package vm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/wire"
)

// The frames rv_relay.c writes are the frames Go's reader reads (the
// front end's, wire.ReadFrame): a frame Go makes, one larger than the
// socket holds, and a file's head whose descriptor crosses with it; then
// the end of the stream once the relay finishes.
func TestRelayFramesCToGo(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "front-end")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	front := c.(*net.UnixConn)
	defer front.Close()
	RelayOpen(fds[0])

	file, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	file.WriteString("the file's bytes")
	fileFD, err := syscall.Dup(int(file.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	file.Close()

	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: many writes
	go func() {
		RelaySend(wire.WorkerStats, 7, 3, 9, []byte("stats"))
		RelaySend(wire.OutData, 8, 0, 0, big)
		m := msg.New(wire.OutFile, 9, wire.FlagEnd|wire.FlagFinal, 200, 14)
		p := m.Payload()
		binary.NativeEndian.PutUint64(p, uint64(16))
		wire.SetResponseFD(p, int32(fileFD))
		binary.NativeEndian.PutUint16(p[12:], 0)
		RelaySendMsg(m) // the relay owns the descriptor now, and closes it once sent
		RelayFinish()
	}()

	var got []int // descriptors received, in order
	r := bufio.NewReaderSize(readerFunc(func(b []byte) (int, error) {
		oob := make([]byte, syscall.CmsgSpace(200*4))
		n, oobn, _, _, err := front.ReadMsgUnix(b, oob)
		if oobn > 0 {
			msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				rights, _ := syscall.ParseUnixRights(&m)
				got = append(got, rights...)
			}
		}
		return n, err
	}), 64<<10)
	var hdr [wire.FrameHeader]byte
	read := func() (wire.Frame, []byte) {
		t.Helper()
		fr, err := wire.ReadFrame(r, &hdr)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, fr.Len)
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		return fr, p
	}
	if fr, p := read(); fr != (wire.Frame{Kind: wire.WorkerStats, Stream: 7, Flags: 3, Aux: 9, Len: 5}) || string(p) != "stats" {
		t.Fatalf("first frame %+v %q", fr, p)
	}
	if fr, p := read(); fr.Kind != wire.OutData || fr.Stream != 8 || !bytes.Equal(p, big) {
		t.Fatalf("the large frame: %+v, %d bytes", fr, len(p))
	}
	fr, p := read()
	if fr != (wire.Frame{Kind: wire.OutFile, Stream: 9, Flags: wire.FlagEnd | wire.FlagFinal, Aux: 200, Len: 14}) {
		t.Fatalf("the file's frame %+v", fr)
	}
	if _, fd, _, _, ok := wire.ResponseStart(p); !ok || fd != int32(fileFD) {
		t.Fatalf("the head names descriptor %d, want the sender's %d", fd, fileFD)
	}
	if len(got) != 1 {
		t.Fatalf("%d descriptors crossed, want 1", len(got))
	}
	b := make([]byte, 64)
	n, _ := syscall.Pread(got[0], b, 0)
	syscall.Close(got[0])
	if string(b[:n]) != "the file's bytes" {
		t.Fatalf("the descriptor that crossed reads %q", b[:n])
	}
	if _, err := wire.ReadFrame(r, &hdr); !errors.Is(err, io.EOF) {
		t.Fatalf("after RelayFinish: %v, want EOF", err)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }
