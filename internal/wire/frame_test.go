package wire

import (
	"bytes"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b []byte
	b = AppendFrame(b, InRequest, 7<<32|3, FlagError, 42, []byte("head"))
	b = AppendFrame(b, OutEnd, 9, FlagEnd|FlagFinal, 0, nil)
	if len(b) != 2*FrameHeader+4 {
		t.Fatalf("frames are %d bytes, want %d", len(b), 2*FrameHeader+4)
	}
	if n := FrameLen(b); n != 4 {
		t.Fatalf("FrameLen of the first header: %d, want 4", n)
	}
	r := bytes.NewReader(b)
	var hdr [FrameHeader]byte
	f, err := ReadFrame(r, &hdr)
	if err != nil || f != (Frame{Kind: InRequest, Flags: FlagError, Stream: 7<<32 | 3, Aux: 42, Len: 4}) {
		t.Fatalf("first frame: %+v, %v", f, err)
	}
	p := make([]byte, f.Len)
	if _, err := io.ReadFull(r, p); err != nil || string(p) != "head" {
		t.Fatalf("payload %q, %v", p, err)
	}
	f, err = ReadFrame(r, &hdr)
	if err != nil || f != (Frame{Kind: OutEnd, Flags: FlagEnd | FlagFinal, Stream: 9}) {
		t.Fatalf("second frame: %+v, %v", f, err)
	}
	if _, err := ReadFrame(r, &hdr); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestFrameRefusesBrokenHeaders(t *testing.T) {
	var hdr [FrameHeader]byte
	long := AppendFrame(nil, OutData, 1, 0, 0, nil)
	order.PutUint32(long[24:], FrameMax+1)
	padded := AppendFrame(nil, OutData, 1, 0, 0, nil)
	order.PutUint32(padded[28:], 1)
	for name, b := range map[string][]byte{"too long": long, "padding set": padded} {
		if _, err := ReadFrame(bytes.NewReader(b), &hdr); err != ErrFrame {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
	if _, err := ReadFrame(bytes.NewReader(long[:10]), &hdr); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut header: %v, want ErrUnexpectedEOF", err)
	}
}

func TestStatsRoundTrip(t *testing.T) {
	var v [WorkerStatsCount]uint64
	for i := range v {
		v[i] = uint64(i)*1000 + 1
	}
	got, ok := ReadStats(AppendStats(nil, v))
	if !ok || got != v {
		t.Fatalf("got %v %v", got, ok)
	}
	if _, ok := ReadStats(make([]byte, 8)); ok {
		t.Fatal("a short payload was read")
	}
}
