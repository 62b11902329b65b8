package vm

// The C side of the wire, for the tests that hold it against Go's
// (wire_test.go): cgo cannot be used from a _test.go file. None of these
// needs the VM to run.

/*
#include <stdlib.h>
#include "rv_wire.h"

static int rv_check_header(rv_reader *r, rv_req_header *h) { return rv_req_header_read(r, h); }
*/
import "C"

import (
	"bytes"
	"unsafe"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// readRequestHeadC reads a request head with rv_wire.c's reader.
func readRequestHeadC(p []byte) (wire.RequestHead, bool) {
	var h wire.RequestHead
	cp := C.CBytes(p)
	defer C.free(cp)
	var ch C.rv_req_head
	if C.rv_req_head_read((*C.char)(cp), C.size_t(len(p)), &ch) == 0 {
		return h, false
	}
	h.Flags, h.Window, h.Arrived = uint8(ch.flags), uint32(ch.window), uint64(ch.arrived)
	for i := range h.Fields {
		if ch.field_len[i] >= 0 {
			h.Fields[i] = C.GoStringN(ch.field[i], C.int(ch.field_len[i]))
			h.Present[i] = true
		}
	}
	r := ch.headers
	for i := 0; i < int(ch.nheaders); i++ {
		var hd C.rv_req_header
		if C.rv_check_header(&r, &hd) == 0 {
			return h, false
		}
		x := wire.RequestHeader{Code: uint16(hd.code), Value: C.GoStringN(hd.value, C.int(hd.value_len))}
		if hd.code == 0 {
			x.Name = C.GoStringN(hd.name, C.int(hd.name_len))
		}
		h.Headers = append(h.Headers, x)
	}
	return h, true
}

// writeResponseHeadC builds a response head with rv_wire.c's writer.
func writeResponseHeadC(status int, length int64, fd int32, headers [][2]string, body []byte) []byte {
	var b C.rv_buf
	C.rv_resp_head_start(&b, C.RV_OUT_HEAD, 1, C.uint64_t(status), 64)
	for _, h := range headers {
		name, value := C.CString(h[0]), C.CString(h[1])
		C.rv_resp_head_put(&b, name, C.uint16_t(len(h[0])), value, C.size_t(len(h[1])))
		C.free(unsafe.Pointer(name))
		C.free(unsafe.Pointer(value))
	}
	if length >= 0 {
		C.rv_resp_head_set_length(b.m, C.int64_t(length))
	}
	if fd >= 0 {
		C.rv_resp_head_set_fd(b.m, C.int32_t(fd))
	}
	if len(body) > 0 {
		cb := C.CBytes(body)
		C.rv_buf_put(&b, cb, C.size_t(len(body)))
		C.free(cb)
	}
	m := fromC(C.rv_buf_finish(&b))
	defer m.Free()
	if m.Aux() != uint64(status) {
		return nil
	}
	return append([]byte(nil), m.Payload()...)
}

// writeStringsC builds a payload of strings with rv_buf_put_str, as log
// entries are.
func writeStringsC(ss []string) []byte {
	var b C.rv_buf
	C.rv_buf_start(&b, C.RV_OUT_LOG, 0, 16)
	for _, s := range ss {
		cs := C.CString(s)
		C.rv_buf_put_str(&b, cs, C.size_t(len(s)))
		C.free(unsafe.Pointer(cs))
	}
	m := fromC(C.rv_buf_finish(&b))
	defer m.Free()
	return append([]byte(nil), m.Payload()...)
}

// readStringC reads one string with rv_read_str: nil when absent.
func readStringC(p []byte) (s []byte, n int, ok bool) {
	cp := C.CBytes(p)
	defer C.free(cp)
	r := C.rv_reader{p: (*C.char)(cp), end: (*C.char)(unsafe.Add(cp, len(p)))}
	var sp *C.char
	var sl C.long
	if C.rv_read_str(&r, &sp, &sl) == 0 {
		return nil, 0, false
	}
	n = int(uintptr(unsafe.Pointer(r.p)) - uintptr(cp))
	if sl < 0 {
		return nil, n, true
	}
	return C.GoBytes(unsafe.Pointer(sp), C.int(sl)), n, true
}

// readTemplateSettingsC reads a template's settings with rv_wire.c's
// reader, as rv_template.c does.
func readTemplateSettingsC(p []byte) (s wire.TemplateSettings, load []byte, ok bool) {
	cp := C.CBytes(p)
	defer C.free(cp)
	var c C.rv_template_settings
	if C.rv_template_settings_read((*C.char)(cp), C.size_t(len(p)), &c) == 0 {
		return s, nil, false
	}
	split := func(p *C.char, n C.long) []string {
		var out []string
		for _, part := range bytes.SplitAfter(C.GoBytes(unsafe.Pointer(p), C.int(n)), []byte{0}) {
			if len(part) > 0 {
				out = append(out, string(part[:len(part)-1]))
			}
		}
		return out
	}
	s.Program = C.GoStringN(c.program, C.int(c.program_len))
	s.Args = split(c.argv, c.argv_len)
	s.RubyLib = split(c.rubylib, c.rubylib_len)
	s.MaxStreams, s.Window = uint32(c.max_streams), uint64(c.window)
	if int(c.argc) != len(s.Args) {
		return s, nil, false
	}
	return s, C.GoBytes(unsafe.Pointer(c.load), C.int(c.load_len)), true
}
