package h1guard

import (
	"bytes"
	"math"
)

// defaultMaxHeaderBytes is the server's header limit when the caller did
// not say: Caddy's own default for max_header_size (caddyhttp.App.Provision),
// which it gives Go's server as MaxHeaderBytes.
const defaultMaxHeaderBytes = 16 << 10

// headLimit is how much of a request head Go's server reads before it
// answers 431: its MaxHeaderBytes, and the 4 KiB more net/http allows for
// its read buffer (Server.initialReadLimitSize). Past as much head without
// its end, the guard refuses it at once: it holds no more than Go would,
// and the client hears 431 as soon as Caddy alone would tell it (before,
// the guard took up to 1 MiB and waited for the header timeout).
func headLimit(maxHeaderBytes int) int {
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = defaultMaxHeaderBytes
	}
	return maxHeaderBytes + 4096
}

// headEnd is the length of the head at the start of b, through the empty
// line that ends it, or -1 while incomplete; then scanned is where the
// last, incomplete line starts, to resume from when more bytes come (a head
// that arrives a byte at a time costs no more than one that comes whole).
// Lines end in LF, with or without a CR before it, as Go's reader takes
// them: the head ends at the first line that is empty or a lone CR,
// whatever ends the lines before.
func headEnd(b []byte, from int) (end, scanned int) {
	for start := from; start < len(b); {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1, start
		}
		if start > 0 && (i == 0 || (i == 1 && b[start] == '\r')) {
			return start + i + 1, 0
		}
		start += i + 1
	}
	return -1, len(b)
}

// checkHead judges a request head and says how its body is framed. It runs
// for every cleartext HTTP/1 request, so it reads the head in place and
// allocates nothing.
func checkHead(head []byte) (framing, bool) {
	request, rest, _ := bytes.Cut(bytes.TrimRight(head, "\r\n"), newline)
	request = bytes.TrimRight(request, "\r")
	if bytes.HasPrefix(request, h2Preface) {
		return framing{state: statePassthrough}, true
	}
	http10 := bytes.HasSuffix(request, http10Suffix)
	var te []byte
	var length int64 = -1
	tes, cls := 0, 0
	upgrade := false
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, newline)
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return framing{}, false // obs-fold
		}
		name, value, ok := bytes.Cut(line, colon)
		if !ok {
			continue // Go refuses it itself
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, transferEncoding):
			tes++
			te = value
		case bytes.EqualFold(name, contentLength):
			cls++
			n, ok := parseLength(value)
			if !ok || (length >= 0 && n != length) {
				return framing{}, false
			}
			length = n
		case bytes.EqualFold(name, upgradeHeader):
			upgrade = true
		}
	}
	next := framing{state: stateHead}
	switch {
	case tes > 0:
		if cls > 0 || http10 || tes != 1 || !bytes.EqualFold(te, chunked) {
			return framing{}, false
		}
		next.state = stateChunkSize
	case length > 0:
		next = framing{state: stateBody, length: length}
	}
	// After a protocol switch (a 101 answer, see guardConn.Write) the
	// bytes are not HTTP/1; until then the request is framed as any other.
	next.upgrade = upgrade
	return next, true
}

// http2Preface is what an HTTP/2 client sends first (RFC 9113 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

var (
	newline          = []byte("\n")
	colon            = []byte(":")
	h2Preface        = []byte("PRI * HTTP/2.0")
	http10Suffix     = []byte(" HTTP/1.0")
	transferEncoding = []byte("Transfer-Encoding")
	contentLength    = []byte("Content-Length")
	upgradeHeader    = []byte("Upgrade")
	chunked          = []byte("chunked")
)

// parseLength reads a Content-Length value: decimal digits only, at least
// one, and small enough for an int64.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		d := int64(c - '0')
		if c < '0' || c > '9' || n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
