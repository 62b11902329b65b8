package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
)

// headerFixedLen is the fixed start of a HEAD or FILE payload (rv_response.c):
// i64 content length, i32 file descriptor, u16 header count.
const headerFixedLen = 14

// responder writes one request's response messages to its ResponseWriter.
type responder struct {
	w            http.ResponseWriter
	sendfileDirs []string // X-Sendfile may name files in these
	log          func(msg, path string)
	ignoreBody   bool  // the server sent a file in the body's place
	err          error // a write failed
	rc           *http.ResponseController
	wroteHead    bool
	ended        bool // the response is complete
	reset        bool // the VM cut the body short
	wantDone     bool // the VM waits for RV_IN_DONE
	written      int  // body bytes written since the last credit
}

var errClientGone = errors.New("ruvoy: writing to the client failed")

// write handles a batch of messages and frees them. It reports
// errClientGone when a write failed.
func (rs *responder) write(m *C.rv_msg) error {
	var err error
	for m != nil {
		next := m.next
		if err == nil && !rs.ended {
			err = rs.handle(m)
		} else {
			dropMsg(m)
			m = next
			continue
		}
		freeMsg(m)
		m = next
	}
	return err
}

func (rs *responder) handle(m *C.rv_msg) error {
	p := payload(m)
	if m.flags&C.RV_F_WANT_DONE != 0 {
		rs.wantDone = true
	}
	switch m.kind {
	case C.RV_OUT_HEAD:
		body, ok := rs.writeHead(p, int(m.aux))
		if !ok {
			return nil
		}
		if err := rs.writeBody(body); err != nil {
			return err
		}
	case C.RV_OUT_FILE:
		if err := rs.writeFile(p, int(m.aux)); err != nil {
			return err
		}
	case C.RV_OUT_DATA:
		if err := rs.writeBody(p); err != nil {
			return err
		}
	case C.RV_OUT_RESET:
		rs.reset = true
	}
	if m.flags&C.RV_F_END != 0 {
		rs.ended = true
	}
	return nil
}

// writeHead sets the headers and status; it returns the body bytes that
// follow them in the payload.
func (rs *responder) writeHead(p []byte, status int) ([]byte, bool) {
	if len(p) < headerFixedLen || rs.wroteHead {
		return nil, false
	}
	length := int64(binary.NativeEndian.Uint64(p[0:8]))
	count := int(binary.NativeEndian.Uint16(p[12:14]))
	p = p[headerFixedLen:]
	h := rs.w.Header()
	for i := 0; i < count && len(p) >= 2; i++ {
		nlen := int(binary.NativeEndian.Uint16(p))
		if len(p) < 2+nlen+4 {
			break
		}
		name := canonicalHeader(p[2 : 2+nlen])
		p = p[2+nlen:]
		vlen := int(binary.NativeEndian.Uint32(p))
		if len(p) < 4+vlen {
			break
		}
		h[name] = append(h[name], string(p[4:4+vlen]))
		p = p[4+vlen:]
	}
	if length >= 0 {
		h["Content-Length"] = []string{strconv.FormatInt(length, 10)}
	}
	if took, err := rs.sendfile(status); took {
		rs.err = err
		return nil, true
	}
	rs.w.WriteHeader(status)
	rs.wroteHead = true
	return p, true
}

func (rs *responder) writeBody(p []byte) error {
	if rs.err != nil {
		return rs.err
	}
	if len(p) == 0 || rs.ignoreBody {
		return nil
	}
	if _, err := rs.w.Write(p); err != nil {
		return errClientGone
	}
	rs.written += len(p)
	return nil
}

// writeFile sends a file body: the VM opened it, Go owns the descriptor now.
func (rs *responder) writeFile(p []byte, status int) error {
	fd := headFD(p)
	if fd < 0 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "response-body")
	defer f.Close()
	length := int64(binary.NativeEndian.Uint64(p[0:8]))
	if _, ok := rs.writeHead(p, status); !ok || rs.ignoreBody {
		return rs.err
	}
	if _, err := io.CopyN(rs.w, f, length); err != nil {
		return errClientGone
	}
	return nil
}

// flush pushes what was written to the client and returns how many body
// bytes left since the last flush, to credit the VM's window.
func (rs *responder) flush() (int, error) {
	if rs.rc == nil {
		rs.rc = http.NewResponseController(rs.w)
	}
	if err := rs.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, errClientGone
	}
	n := rs.written
	rs.written = 0
	return n, nil
}

// commonHeaders maps header names as apps write them (lower case, Rack 3)
// and in canonical form to the canonical form, without allocating.
var commonHeaders = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{
		"Accept-Ranges", "Access-Control-Allow-Origin", "Age", "Cache-Control", "Connection",
		"Content-Disposition", "Content-Encoding", "Content-Language", "Content-Length",
		"Content-Location", "Content-Range", "Content-Security-Policy", "Content-Type", "Date",
		"Etag", "Expires", "Last-Modified", "Link", "Location", "Pragma", "Referrer-Policy",
		"Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security", "Vary",
		"Www-Authenticate", "X-Content-Type-Options", "X-Download-Options", "X-Frame-Options",
		"X-Permitted-Cross-Domain-Policies", "X-Request-Id", "X-Runtime", "X-Xss-Protection",
	} {
		m[name] = name
		lower := []byte(name)
		for i, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		m[string(lower)] = name
	}
	m["ETag"] = "Etag"
	return m
}()

func canonicalHeader(b []byte) string {
	if name, ok := commonHeaders[string(b)]; ok {
		return name
	}
	return textproto.CanonicalMIMEHeaderKey(string(b))
}
