package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import (
	"encoding/binary"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// headerCodes maps a canonical request header name to its code in the VM's
// table of ready-made env keys (rv_env.c); others travel as CGI names.
var headerCodes = func() map[string]uint16 {
	codes := map[string]uint16{}
	for i := 1; ; i++ {
		name := C.rv_header_name(C.int(i))
		if name == nil {
			return codes
		}
		codes[C.GoString(name)] = uint16(i)
	}
}()

const absent = 0xffffffff

// forwardedHeaders are what proxies add about the client; from anyone but
// a trusted proxy they are dropped, so the app cannot be told lies.
var forwardedHeaders = map[string]bool{
	"X-Forwarded-For": true, "X-Forwarded-Proto": true, "X-Forwarded-Host": true, "X-Forwarded-Port": true,
	"X-Forwarded-Ssl": true, "X-Forwarded-Scheme": true, "X-Real-Ip": true, "Forwarded": true,
	"Front-End-Https": true,
}

// encodeHead appends the RV_IN_REQUEST payload for r (layout: rv_env.c).
// trusted says r came from a trusted proxy (see AppOptions.Trusted).
func encodeHead(b []byte, r *http.Request, remoteAddr string, tls, trusted, body bool, window uint32, context []byte) ([]byte, bool) {
	if trusted && !tls {
		tls = strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	}
	var flags byte
	if tls {
		flags |= C.RV_REQ_TLS
	}
	if body {
		flags |= C.RV_REQ_BODY
	}
	if r.Method == http.MethodHead {
		flags |= C.RV_REQ_HEAD
	}
	asterisk := r.RequestURI == "*"
	if asterisk {
		flags |= C.RV_REQ_ASTERISK
	}
	b = append(b, flags, 0, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, window)
	b = putString(b, r.Method)
	if asterisk {
		b = putString(b, "")
	} else {
		b = putString(b, r.URL.EscapedPath())
	}
	b = putString(b, r.URL.RawQuery)
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	b = putString(b, uri)
	name, port := serverAuthority(r, tls)
	b = putString(b, name)
	b = putString(b, port)
	b = putString(b, r.Proto)
	b = putString(b, remoteAddr)
	if r.ContentLength > 0 || (r.ContentLength == 0 && len(r.Header["Content-Length"]) > 0) {
		b = binary.NativeEndian.AppendUint32(b, uint32(len(strconv.FormatInt(r.ContentLength, 10))))
		b = strconv.AppendInt(b, r.ContentLength, 10)
	} else {
		b = binary.NativeEndian.AppendUint32(b, absent)
	}
	if ct := r.Header["Content-Type"]; len(ct) > 0 {
		b = putString(b, ct[0])
	} else {
		b = binary.NativeEndian.AppendUint32(b, absent)
	}
	if context != nil {
		b = binary.NativeEndian.AppendUint32(b, uint32(len(context)))
		b = append(b, context...)
	} else {
		b = binary.NativeEndian.AppendUint32(b, absent)
	}

	countAt := len(b)
	b = append(b, 0, 0)
	count := 0
	if r.Host != "" {
		b, count = putHeader(b, count, "Host", []string{r.Host})
	}
	for name, values := range r.Header {
		if name == "Content-Type" || name == "Content-Length" || name == "Version" || strings.IndexByte(name, '_') >= 0 ||
			(!trusted && forwardedHeaders[name]) {
			// CONTENT_TYPE and CONTENT_LENGTH carry these, HTTP_VERSION is
			// the protocol's; a name with "_" would pass for one with "-"
			// in the env (X_Forwarded_For).
			continue
		}
		b, count = putHeader(b, count, name, values)
	}
	if count > 0xffff {
		return b, false
	}
	binary.NativeEndian.PutUint16(b[countAt:], uint16(count))
	return b, true
}

func putString(b []byte, s string) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// putHeader appends one env entry: repeated values joined with ", ", or
// with "; " for Cookie, as the SPEC's CGI rules say.
func putHeader(b []byte, count int, name string, values []string) ([]byte, int) {
	if len(values) == 0 {
		return b, count
	}
	if code, ok := headerCodes[name]; ok {
		b = binary.NativeEndian.AppendUint16(b, code)
	} else {
		b = binary.NativeEndian.AppendUint16(b, 0)
		b = binary.NativeEndian.AppendUint16(b, uint16(len("HTTP_")+len(name)))
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
	sep := ", "
	if name == "Cookie" {
		sep = "; "
	}
	n := len(sep) * (len(values) - 1)
	for _, v := range values {
		n += len(v)
	}
	b = binary.NativeEndian.AppendUint32(b, uint32(n))
	for i, v := range values {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, v...)
	}
	return b, count + 1
}

// serverAuthority is SERVER_NAME and SERVER_PORT: from the Host header (or
// the absolute-form target, which Go already put in r.Host), else from the
// address the request arrived on.
func serverAuthority(r *http.Request, tls bool) (name, port string) {
	host := r.Host
	if host == "" {
		if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			host = addr.String()
		}
	}
	name, port = host, ""
	if strings.HasPrefix(host, "[") {
		if end := strings.IndexByte(host, ']'); end >= 0 {
			name = host[:end+1]
			port = strings.TrimPrefix(host[end+1:], ":")
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		name, port = host[:i], host[i+1:]
	}
	if port == "" {
		port = "80"
		if tls {
			port = "443"
		}
	}
	return name, port
}

// remoteHost is the client address without its port.
func remoteHost(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}
