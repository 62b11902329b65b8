package wire

import (
	"errors"
	"io"
)

// Frame is a message's header as it crosses between the front end and a
// worker process (wire.h: "Workers"); its payload follows it.
type Frame struct {
	Kind   uint32
	Flags  uint32
	Stream uint64
	Aux    uint64
	Len    uint32 // payload bytes
}

// AppendFrame appends a frame: its header, then payload.
func AppendFrame(b []byte, kind uint32, stream uint64, flags uint32, aux uint64, payload []byte) []byte {
	b = order.AppendUint32(b, kind)
	b = order.AppendUint32(b, flags)
	b = order.AppendUint64(b, stream)
	b = order.AppendUint64(b, aux)
	b = order.AppendUint32(b, uint32(len(payload)))
	b = order.AppendUint32(b, 0)
	return append(b, payload...)
}

// ErrFrame is a frame header no worker or front end writes: the stream
// between them is broken.
var ErrFrame = errors.New("ruvoy: a malformed frame between the front end and a worker")

// ReadFrame reads a frame's header from r.
func ReadFrame(r io.Reader, buf *[FrameHeader]byte) (Frame, error) {
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{
		Kind:   order.Uint32(buf[0:]),
		Flags:  order.Uint32(buf[4:]),
		Stream: order.Uint64(buf[8:]),
		Aux:    order.Uint64(buf[16:]),
		Len:    order.Uint32(buf[24:]),
	}
	if f.Len > FrameMax || order.Uint32(buf[28:]) != 0 {
		return Frame{}, ErrFrame
	}
	return f, nil
}

// FrameLen is the payload length a frame's header h gives.
func FrameLen(h []byte) uint32 { return order.Uint32(h[24:]) }

// AppendStats appends a WorkerStats payload.
func AppendStats(b []byte, values [WorkerStatsCount]uint64) []byte {
	for _, v := range values {
		b = order.AppendUint64(b, v)
	}
	return b
}

// ReadStats reads a WorkerStats payload.
func ReadStats(p []byte) (values [WorkerStatsCount]uint64, ok bool) {
	if len(p) != 8*WorkerStatsCount {
		return values, false
	}
	for i := range values {
		values[i] = order.Uint64(p[8*i:])
	}
	return values, true
}
