package serve

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// forwardedHeaders are what proxies add about the client; from anyone but
// a trusted proxy they are dropped, so the app cannot be told lies.
var forwardedHeaders = map[string]bool{
	"X-Forwarded-For": true, "X-Forwarded-Proto": true, "X-Forwarded-Host": true, "X-Forwarded-Port": true,
	"X-Forwarded-Ssl": true, "X-Forwarded-Scheme": true, "X-Real-Ip": true, "Forwarded": true,
	"Front-End-Https": true,
}

// headInfo is what a request head carries beside the request itself.
type headInfo struct {
	remote     string // REMOTE_ADDR: the client as the server names it
	tls        bool   // the client reached the server over TLS
	trusted    bool   // r came from a trusted proxy (AppOptions.Trusted)
	body       bool   // a body follows the head
	hintsHTTP1 bool   // AppOptions.EarlyHintsHTTP1
	window     uint32 // response bytes in flight
	arrived    uint64 // when the head arrived: CLOCK_MONOTONIC ns
	// requestStart is X-Request-Start: a trusted proxy's, or when the head
	// arrived (queuetime.go).
	requestStart string
	context      []byte // env["ruvoy.context"], or nil
	scriptName   string // SCRIPT_NAME: where a server in front mounted the app
	remoteUser   string // REMOTE_USER: the user a server in front authenticated, or ""
}

// encodeHead appends the wire.InRequest payload for r (a request head,
// internal/vm/wire.h).
func encodeHead(b []byte, r *http.Request, h *headInfo) ([]byte, bool) {
	tls, trusted := h.tls, h.trusted
	if trusted && !tls {
		tls = strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	}
	var flags uint8
	if tls {
		flags |= wire.ReqTLS
	}
	if h.body {
		flags |= wire.ReqBody
	} else if r.ProtoMajor == 1 {
		flags |= wire.ReqHijack // rack.hijack? (hijack.go)
	}
	if r.Method == http.MethodHead {
		flags |= wire.ReqHead
	}
	if earlyHintsReach(r, h.hintsHTTP1) {
		flags |= wire.ReqEarlyHints
	}
	asterisk := r.RequestURI == "*"
	if asterisk {
		flags |= wire.ReqAsterisk
	}
	b = wire.AppendRequestStart(b, flags, h.window, h.arrived)
	// The fields, in wire.Field* order.
	b = wire.AppendString(b, r.Method)
	if asterisk {
		b = wire.AppendString(b, "")
	} else {
		b = wire.AppendString(b, r.URL.EscapedPath())
	}
	b = wire.AppendString(b, r.URL.RawQuery)
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	b = wire.AppendString(b, uri)
	name, port := serverAuthority(r, tls)
	b = wire.AppendString(b, name)
	b = wire.AppendString(b, port)
	b = wire.AppendString(b, r.Proto)
	b = wire.AppendString(b, h.remote)
	if r.ContentLength > 0 || (r.ContentLength == 0 && len(r.Header["Content-Length"]) > 0) {
		var n [20]byte
		b = wire.AppendString(b, strconv.AppendInt(n[:0], r.ContentLength, 10))
	} else {
		b = wire.AppendAbsent(b)
	}
	if ct := r.Header["Content-Type"]; len(ct) > 0 {
		b = wire.AppendString(b, ct[0])
	} else {
		b = wire.AppendAbsent(b)
	}
	if h.context != nil {
		b = wire.AppendString(b, h.context)
	} else {
		b = wire.AppendAbsent(b)
	}
	b = wire.AppendString(b, h.scriptName)
	if h.remoteUser != "" {
		b = wire.AppendString(b, h.remoteUser)
	} else {
		b = wire.AppendAbsent(b)
	}

	b, countAt := wire.AppendHeaderCount(b)
	count := 0
	if r.Host != "" {
		b, count = putHeader(b, count, "Host", []string{r.Host})
	}
	for name, values := range r.Header {
		if name == "Content-Type" || name == "Content-Length" || name == "Version" || strings.IndexByte(name, '_') >= 0 ||
			(!trusted && forwardedHeaders[name]) || name == requestStartHeader {
			// CONTENT_TYPE and CONTENT_LENGTH carry these, HTTP_VERSION is
			// the protocol's; a name with "_" would pass for one with "-"
			// in the env (X_Forwarded_For); X-Request-Start is the
			// server's own, below.
			continue
		}
		b, count = putHeader(b, count, name, values)
	}
	if h.requestStart != "" {
		b, count = putHeader(b, count, requestStartHeader, []string{h.requestStart})
	}
	return b, wire.PutHeaderCount(b, countAt, count)
}

// putHeader appends one env entry: repeated values joined with ", ", or
// with "; " for Cookie, as the SPEC's CGI rules say.
func putHeader(b []byte, count int, name string, values []string) ([]byte, int) {
	if len(values) == 0 {
		return b, count
	}
	sep := ", "
	if name == "Cookie" {
		sep = "; "
	}
	return wire.AppendHeader(b, name, values, sep), count + 1
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
