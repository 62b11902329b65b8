package h1guard

import (
	"bytes"
	"math"
)

// Limits of the chunked framing, as Go's reader has them: a chunk-size line
// of 4 KiB, a trailer section of 4 KiB.
const (
	maxChunkLine = 4096
	maxTrailer   = 4096
)

// chunksLookValid follows the chunked body at the start of b as far as b
// goes, and reports false when what is there breaks the framing.
func chunksLookValid(b []byte) bool {
	f := framer{state: stateChunkSize}
	for len(b) > 0 && f.state != stateHead {
		n, _, refusal := f.step(b)
		if refusal != "" {
			return false
		}
		if n == 0 {
			return true
		}
		b = b[n:]
	}
	return true
}

// chunkLine finds the line at the start of b (no LF before from): complete
// once its LF is there, ok when it ends in CRLF with no other CR (RFC 9112
// allows no bare LF in chunked framing, and no bare CR anywhere). line is
// without CRLF.
func chunkLine(b []byte, from int) (line []byte, ok, complete bool) {
	i := bytes.IndexByte(b[from:], '\n')
	if i < 0 {
		return nil, false, false
	}
	i += from
	if i == 0 || b[i-1] != '\r' || bytes.IndexByte(b[:i-1], '\r') >= 0 {
		return nil, false, true
	}
	return b[:i-1], true, true
}

// chunkSize reads a chunk-size line as Go's chunked reader does: trailing
// spaces and tabs dropped, an extension after ";" ignored, then 1 to 16 hex
// digits and nothing else.
func chunkSize(line []byte) (int64, bool) {
	line = bytes.TrimRight(line, " \t")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || len(line) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// trailerLine accepts a trailer field line: a token, a colon, a value
// without control characters but tab.
func trailerLine(line []byte) bool {
	name, value, ok := bytes.Cut(line, colon)
	if !ok || len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !isTokenChar(c) {
			return false
		}
	}
	for _, c := range value {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}
