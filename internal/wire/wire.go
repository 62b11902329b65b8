// Package wire is the Go side of the messages Go and the VM thread
// exchange: the constants of internal/vm/wire.h (wire_gen.go, generated
// from it) and the Go encoders and decoders of its payloads. Pure Go: its
// tests need no Ruby.
package wire

//go:generate go test -run TestGenerated -update

import (
	"encoding/binary"
	"errors"
	"net/http"
	"time"
)

var order = binary.NativeEndian

// ---- strings ----

// AppendString appends s as a string: its u32 length, then its bytes.
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = order.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendAbsent appends an absent string.
func AppendAbsent(b []byte) []byte { return order.AppendUint32(b, Absent) }

// ReadString takes a string off the front of p: its bytes (nil when it is
// absent) and what follows; ok is false when p is too short.
func ReadString(p []byte) (s, rest []byte, ok bool) {
	if len(p) < 4 {
		return nil, nil, false
	}
	n := order.Uint32(p)
	if n == Absent {
		return nil, p[4:], true
	}
	if uint64(len(p)-4) < uint64(n) {
		return nil, nil, false
	}
	return p[4 : 4+n : 4+n], p[4+n:], true
}

// ReadStrings reads a payload of strings (a log entry), up to the first
// one that is cut short or absent.
func ReadStrings(p []byte) []string {
	var out []string
	for len(p) > 0 {
		s, rest, ok := ReadString(p)
		if !ok || s == nil {
			break
		}
		out = append(out, string(s))
		p = rest
	}
	return out
}

// AppendLoadApp is an InLoadApp payload.
func AppendLoadApp(b []byte, rackup, environment, upstreams string) []byte {
	return AppendString(AppendString(AppendString(b, rackup), environment), upstreams)
}

// ---- request heads ----

// headerCodes maps a header name to its code in HeaderNames.
var headerCodes = func() map[string]uint16 {
	m := make(map[string]uint16, len(HeaderNames))
	for i, name := range HeaderNames[1:] {
		m[name] = uint16(i + 1)
	}
	return m
}()

// AppendRequestStart appends a request head's fixed part; its fields
// follow (AppendString, AppendAbsent), then its headers (AppendHeaderCount).
func AppendRequestStart(b []byte, flags uint8, window uint32, arrived uint64) []byte {
	b = append(b, flags, 0, 0, 0)
	b = order.AppendUint32(b, window)
	return order.AppendUint64(b, arrived)
}

// HeadAux is an RV_OUT_HEAD's or RV_OUT_FILE's aux read: the status, and
// how long the request waited from its head's arrival to the app's call.
func HeadAux(aux uint64) (status int, queued time.Duration) {
	return int(uint32(aux)), time.Duration(aux>>AuxQueuedShift) * time.Microsecond
}

// AppendHeaderCount appends a zero header count and says where it is,
// for PutHeaderCount once the headers are in.
func AppendHeaderCount(b []byte) ([]byte, int) { return append(b, 0, 0), len(b) }

// PutHeaderCount sets the header count at at; false when there are more
// than a u16 holds.
func PutHeaderCount(b []byte, at, n int) bool {
	if n > 0xffff {
		return false
	}
	order.PutUint16(b[at:], uint16(n))
	return true
}

// AppendHeader appends a request header under its code, or under its CGI
// name (HTTP_X_FOO for X-Foo) when it has none: values joined with sep.
func AppendHeader(b []byte, name string, values []string, sep string) []byte {
	if code, ok := headerCodes[name]; ok {
		b = order.AppendUint16(b, code)
	} else {
		b = order.AppendUint16(b, 0)
		b = order.AppendUint16(b, uint16(len("HTTP_")+len(name)))
		b = append(b, "HTTP_"...)
		for i := 0; i < len(name); i++ {
			c := name[i]
			switch {
			case c == '-':
				c = '_'
			case c >= 'a' && c <= 'z':
				c -= 'a' - 'A'
			}
			b = append(b, c)
		}
	}
	n := len(sep) * (len(values) - 1)
	for _, v := range values {
		n += len(v)
	}
	b = order.AppendUint32(b, uint32(n))
	for i, v := range values {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, v...)
	}
	return b
}

// RequestHead is a request head read back: what the VM sees.
type RequestHead struct {
	Flags   uint8
	Window  uint32
	Arrived uint64 // CLOCK_MONOTONIC ns
	Fields  [FieldCount]string
	Present [FieldCount]bool
	Headers []RequestHeader
}

// RequestHeader is one header: Name is the CGI name when Code is 0.
type RequestHeader struct {
	Code  uint16
	Name  string
	Value string
}

var errShort = errors.New("wire: payload cut short")

// ReadRequestHead reads a request head as the VM does (rv_wire.c): the
// tests compare the two readers.
func ReadRequestHead(p []byte) (RequestHead, error) {
	var h RequestHead
	if len(p) < ReqFieldsAt {
		return h, errShort
	}
	h.Flags = p[ReqFlagsAt]
	h.Window = order.Uint32(p[ReqWindowAt:])
	h.Arrived = order.Uint64(p[ReqArrivedAt:])
	p = p[ReqFieldsAt:]
	for i := range h.Fields {
		s, rest, ok := ReadString(p)
		if !ok {
			return h, errShort
		}
		h.Fields[i], h.Present[i], p = string(s), s != nil, rest
	}
	if len(p) < 2 {
		return h, errShort
	}
	n := int(order.Uint16(p))
	p = p[2:]
	for i := 0; i < n; i++ {
		if len(p) < 2 {
			return h, errShort
		}
		hd := RequestHeader{Code: order.Uint16(p)}
		p = p[2:]
		if hd.Code == 0 || int(hd.Code) >= len(HeaderNames) {
			hd.Code = 0
			if len(p) < 2 || len(p)-2 < int(order.Uint16(p)) {
				return h, errShort
			}
			l := int(order.Uint16(p))
			hd.Name, p = string(p[2:2+l]), p[2+l:]
		}
		v, rest, ok := ReadString(p)
		if !ok || v == nil {
			return h, errShort
		}
		hd.Value, p = string(v), rest
		h.Headers = append(h.Headers, hd)
	}
	return h, nil
}

// ---- response heads ----

// ResponseStart reads a response head's fixed part: the content length
// (-1: unknown), the file descriptor (-1: none), the header count, and the
// headers and what follows; ok is false when p is too short.
func ResponseStart(p []byte) (length int64, fd int32, count int, rest []byte, ok bool) {
	if len(p) < RespHeadersAt {
		return 0, -1, 0, nil, false
	}
	length = int64(order.Uint64(p[RespLengthAt:]))
	fd = int32(order.Uint32(p[RespFDAt:]))
	count = int(order.Uint16(p[RespCountAt:]))
	return length, fd, count, p[RespHeadersAt:], true
}

// ResponseHeader takes one header off the front of p; ok is false when p
// is cut short.
func ResponseHeader(p []byte) (name, value, rest []byte, ok bool) {
	if len(p) < 2 {
		return nil, nil, nil, false
	}
	n := int(order.Uint16(p))
	if len(p) < 2+n {
		return nil, nil, nil, false
	}
	name = p[2 : 2+n]
	value, rest, ok = ReadString(p[2+n:])
	if !ok || value == nil {
		return nil, nil, nil, false
	}
	return name, value, rest, true
}

// ResponseHead is a response head read whole.
type ResponseHead struct {
	Length  int64
	FD      int32
	Headers [][2]string
	Body    []byte
}

// ReadResponseHead reads a response head whole (the handler reads it
// header by header, as it goes).
func ReadResponseHead(p []byte) (ResponseHead, error) {
	length, fd, count, p, ok := ResponseStart(p)
	if !ok {
		return ResponseHead{}, errShort
	}
	h := ResponseHead{Length: length, FD: fd}
	for i := 0; i < count; i++ {
		name, value, rest, ok := ResponseHeader(p)
		if !ok {
			return h, errShort
		}
		h.Headers = append(h.Headers, [2]string{string(name), string(value)})
		p = rest
	}
	h.Body = p
	return h, nil
}

// ---- upstream calls ----

// UpstreamCall is an OutUpstream payload read.
type UpstreamCall struct {
	TimeoutMS              uint32
	Upstream, Method, Path string
	Header                 http.Header
	Body                   []byte
}

// ReadUpstreamCall reads an OutUpstream payload; Body aliases p.
func ReadUpstreamCall(p []byte) (UpstreamCall, bool) {
	var c UpstreamCall
	if len(p) < 4 {
		return c, false
	}
	c.TimeoutMS = order.Uint32(p)
	p = p[4:]
	for _, f := range []*string{&c.Upstream, &c.Method, &c.Path} {
		s, rest, ok := ReadString(p)
		if !ok || s == nil {
			return c, false
		}
		*f, p = string(s), rest
	}
	if len(p) < 2 {
		return c, false
	}
	count := int(order.Uint16(p))
	p = p[2:]
	c.Header = http.Header{}
	for i := 0; i < count; i++ {
		name, rest, ok := ReadString(p)
		if !ok || name == nil {
			return c, false
		}
		value, rest, ok := ReadString(rest)
		if !ok || value == nil {
			return c, false
		}
		c.Header.Add(string(name), string(value))
		p = rest
	}
	c.Body = p
	return c, true
}

// AppendUpstreamReply appends an InUpstreamReply payload: at most 65535
// header lines.
func AppendUpstreamReply(b []byte, status int, h http.Header, body []byte) []byte {
	b = order.AppendUint16(b, uint16(status))
	b, at := AppendHeaderCount(b)
	n := 0
	for name, values := range h {
		for _, v := range values {
			if n == 0xffff {
				break
			}
			b = AppendString(b, name)
			b = AppendString(b, v)
			n++
		}
	}
	PutHeaderCount(b, at, n)
	return append(b, body...)
}

// SetResponseFD replaces the file descriptor in an RV_OUT_FILE payload (a
// front end puts in the descriptor it received for a worker's).
func SetResponseFD(p []byte, fd int32) bool {
	if len(p) < RespHeadersAt {
		return false
	}
	order.PutUint32(p[RespFDAt:], uint32(fd))
	return true
}
