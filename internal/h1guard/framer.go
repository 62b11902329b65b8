package h1guard

import "bytes"

// guardState is where a connection's framing stands.
type guardState int

const (
	stateHead guardState = iota
	stateBody
	stateChunkSize
	stateChunkData
	stateChunkEnd
	stateTrailer
	statePassthrough
	statePreface // over TLS, with h2 chosen: HTTP/2's preface, then passthrough
	stateRefused // a refusal was handed to Go: nothing more is read
)

// framer follows HTTP/1 request framing: where heads, bodies and chunks
// begin and end.
type framer struct {
	state     guardState
	left      int64 // body or chunk bytes still to come
	scanned   int   // bytes already searched for a line or the head's end
	trailer   int   // trailer bytes seen so far
	noH2C     bool  // HTTP/2's preface is refused (Config.NoH2C)
	headLimit int   // the most head it takes (headLimit); 0: the default's
}

// framing is what a head says of the message it begins.
type framing struct {
	state   guardState
	length  int64
	upgrade bool // the request asks to switch protocols (Upgrade)
}

// step reads what comes next in b, which starts where the framing stands.
// It returns how many bytes that was (0: it needs more bytes), with the
// framing it found when those bytes were a head, or the refusal to hand Go
// when they break the rules.
func (f *framer) step(b []byte) (n int, head *framing, refusal string) {
	switch f.state {
	case stateHead:
		end, scanned := headEnd(b, f.scanned)
		f.scanned = scanned
		if end < 0 {
			limit := f.headLimit
			if limit <= 0 {
				limit = headLimit(0)
			}
			if len(b) > limit {
				if bytes.IndexByte(b[:limit], '\n') < 0 {
					return 0, nil, refusedLongURI // the request line alone
				}
				return 0, nil, refusedLongHead
			}
			return 0, nil, ""
		}
		next, ok := checkHead(b[:end])
		if !ok || next.state == statePassthrough && f.noH2C {
			// Go answers a request line it cannot parse with 400 and
			// closes the connection: hand it one.
			return 0, nil, refusedHead
		}
		f.state, f.left, f.trailer = next.state, next.length, 0
		return end, &next, ""
	case stateBody, stateChunkData:
		n := int(min(int64(len(b)), f.left))
		f.left -= int64(n)
		if f.left == 0 {
			if f.state == stateBody {
				f.state = stateHead
			} else {
				f.state = stateChunkEnd
			}
		}
		return n, nil, ""
	case stateChunkEnd:
		if len(b) < 2 {
			return 0, nil, ""
		}
		if b[0] != '\r' || b[1] != '\n' {
			return 0, nil, refusedBody
		}
		f.state = stateChunkSize
		return 2, nil, ""
	}
	// stateChunkSize, stateTrailer: a line.
	line, ok, complete := chunkLine(b, f.scanned)
	if !complete {
		f.scanned = len(b)
		limit := maxChunkLine
		if f.state == stateTrailer {
			limit = maxTrailer - f.trailer
		}
		if len(b) > limit {
			return 0, nil, refusedBody
		}
		return 0, nil, ""
	}
	f.scanned = 0
	if !ok || len(line) >= maxChunkLine {
		return 0, nil, refusedBody
	}
	n = len(line) + 2
	if f.state == stateTrailer {
		f.trailer += n
		switch {
		case len(line) == 0:
			f.state = stateHead
		case f.trailer > maxTrailer || !trailerLine(line):
			return 0, nil, refusedBody
		}
		return n, nil, ""
	}
	size, ok := chunkSize(line)
	if !ok {
		return 0, nil, refusedBody
	}
	if size == 0 {
		f.state = stateTrailer
	} else {
		f.state, f.left = stateChunkData, size
	}
	return n, nil, ""
}
