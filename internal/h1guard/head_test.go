package h1guard

import (
	"strings"
	"testing"
)

// checkHead's verdicts, head by head; the e2e tests (test/protocols_test.go)
// send such requests to the real binary.
func TestCheckHead(t *testing.T) {
	refused := framing{}
	cases := []struct {
		name, head string
		want       framing
		ok         bool
	}{
		{"no body", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", framing{state: stateHead}, true},
		{"content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", framing{state: stateBody, length: 12}, true},
		{"lower-case name, spaces", "POST / HTTP/1.1\r\ncontent-length:   7 \r\n\r\n", framing{state: stateBody, length: 7}, true},
		{"zero length", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", framing{state: stateHead}, true},
		{"equal lengths twice", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", framing{state: stateBody, length: 5}, true},
		{"different lengths", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", refused, false},
		{"length list", "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", refused, false},
		{"signed length", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", refused, false},
		{"empty length", "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", refused, false},
		{"largest length", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n", framing{state: stateBody, length: 1<<63 - 1}, true},
		{"length overflows", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", refused, false},
		{"chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", framing{state: stateChunkSize}, true},
		{"chunked, any case", "POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n", framing{state: stateChunkSize}, true},
		{"chunked and length", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", refused, false},
		{"chunked on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", refused, false},
		{"two codings", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", refused, false},
		{"two headers", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", refused, false},
		{"obs-fold", "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", refused, false},
		{"bare LF lines", "POST / HTTP/1.1\nContent-Length: 3\n\n", framing{state: stateBody, length: 3}, true},
		{"upgrade", "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", framing{state: stateHead, upgrade: true}, true},
		{"upgrade with a body", "POST / HTTP/1.1\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\n", framing{state: stateBody, length: 2, upgrade: true}, true},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\n", framing{state: statePassthrough}, true},
		{"line without colon", "GET / HTTP/1.1\r\nnonsense\r\n\r\n", framing{state: stateHead}, true},
	}
	for _, c := range cases {
		got, ok := checkHead([]byte(c.head))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// The check runs for every cleartext HTTP/1 request: it must not allocate.
func TestCheckHeadAllocates(t *testing.T) {
	head := []byte("POST /upload HTTP/1.1\r\nHost: example.com\r\nUser-Agent: " + strings.Repeat("x", 100) +
		"\r\nContent-Type: text/plain\r\nContent-Length: 262144\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { checkHead(head) }); n != 0 {
		t.Fatalf("checkHead allocated %v times per head", n)
	}
}
