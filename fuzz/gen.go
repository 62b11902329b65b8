package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// What a case is known to be before it is sent.
const (
	valid   = "valid"   // a well-formed request
	invalid = "invalid" // a mutation RFC 9112 forbids (or ruvoy refuses on purpose)
	unknown = "unknown" // random bytes changed: the reference parser decides
)

type testCase struct {
	id        string
	kind      string
	mutation  string
	request   []byte
	halfClose bool // the client half-closes after sending
	noCanary  bool // the request ends the stream (it is cut short): no canary follows
}

// A request before it is written out: its head lines and how its body is
// framed, so that mutations can break one part on purpose.
type request struct {
	method, target, version string
	headers                 []string
	body                    []byte
	chunked                 bool
	chunks                  [][]byte
	extensions              []string // per chunk, "" or ";name=value"
	trailers                []string
	// Framing pieces a mutation may replace.
	sizeLine   func(i int, size int, ext string) string // a chunk's size line, without CRLF
	dataEnd    string                                   // what ends a chunk's data
	lineEnd    string                                   // what ends a chunk-size line
	lastChunk  string
	truncateBy int // bytes of the body not sent
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func newRequest(r *rand.Rand, id string) *request {
	q := &request{method: "GET", target: "/f/" + id, version: "HTTP/1.1",
		sizeLine:  func(_ int, size int, ext string) string { return strconv.FormatInt(int64(size), 16) + ext },
		dataEnd:   "\r\n",
		lineEnd:   "\r\n",
		lastChunk: "0"}
	q.headers = append(q.headers, "Host: fuzz")
	for i := 0; i < int(r.UintN(3)); i++ {
		q.headers = append(q.headers, fmt.Sprintf("X-Fuzz-%d: v%d", i, r.UintN(1000)))
	}
	if r.UintN(3) == 0 {
		return q
	}
	q.method = []string{"POST", "PUT", "PATCH"}[r.UintN(3)]
	q.body = randomBytes(r, int(r.UintN(300)))
	if r.UintN(2) == 0 {
		q.headers = append(q.headers, "Content-Length: "+strconv.Itoa(len(q.body)))
		return q
	}
	q.chunked = true
	q.headers = append(q.headers, "Transfer-Encoding: chunked")
	rest := q.body
	for len(rest) > 0 {
		n := 1 + int(r.UintN(uint(len(rest))))
		q.chunks = append(q.chunks, rest[:n])
		ext := ""
		if r.UintN(4) == 0 {
			ext = ";ext=" + strconv.Itoa(int(r.UintN(100)))
		}
		q.extensions = append(q.extensions, ext)
		rest = rest[n:]
	}
	if r.UintN(4) == 0 {
		q.trailers = append(q.trailers, "X-Trailer: t")
	}
	return q
}

func (q *request) bytes() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", q.method, q.target, q.version)
	for _, h := range q.headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if !q.chunked {
		b.Write(q.body[:len(q.body)-min(q.truncateBy, len(q.body))])
		return b.Bytes()
	}
	for i, c := range q.chunks {
		b.WriteString(q.sizeLine(i, len(c), q.extensions[i]) + q.lineEnd)
		b.Write(c)
		b.WriteString(q.dataEnd)
	}
	b.WriteString(q.lastChunk + "\r\n")
	for _, t := range q.trailers {
		b.WriteString(t + "\r\n")
	}
	b.WriteString("\r\n")
	out := b.Bytes()
	return out[:len(out)-min(q.truncateBy, len(out))]
}

// mutations break a request in a way RFC 9112 forbids, or that ruvoy
// refuses on purpose (docs/protocols.md). Each says whether it applies.
var mutations = []struct {
	name  string
	apply func(r *rand.Rand, q *request) bool
}{
	{"chunk size not hex", func(r *rand.Rand, q *request) bool {
		bad := []string{"Z", "-5", "0x5", "5 5", "+5", " 5"}[r.UintN(6)]
		return q.chunked && len(q.chunks) > 0 && q.setSize(r, func(string) string { return bad })
	}},
	{"chunk size of 17 digits", func(r *rand.Rand, q *request) bool {
		return q.chunked && len(q.chunks) > 0 && q.setSize(r, func(s string) string { return strings.Repeat("0", 17-len(s)) + s })
	}},
	{"no CRLF after chunk data", func(r *rand.Rand, q *request) bool {
		q.dataEnd = ""
		return q.chunked && len(q.chunks) > 0
	}},
	{"other bytes after chunk data", func(r *rand.Rand, q *request) bool {
		q.dataEnd = []string{"XX", "\n", "\r", "\r\r\n", " \r\n"}[r.UintN(5)]
		return q.chunked && len(q.chunks) > 0
	}},
	{"bare LF ends a chunk-size line", func(r *rand.Rand, q *request) bool {
		q.lineEnd = "\n"
		return q.chunked && len(q.chunks) > 0
	}},
	{"bare CR in a chunk-size line", func(r *rand.Rand, q *request) bool {
		q.lineEnd = "\r\r\n"
		return q.chunked && len(q.chunks) > 0
	}},
	{"trailer without a colon", func(r *rand.Rand, q *request) bool {
		q.trailers = append(q.trailers, "no colon here")
		return q.chunked
	}},
	{"trailer folded", func(r *rand.Rand, q *request) bool {
		q.trailers = append(q.trailers, "X-A: 1", " folded")
		return q.chunked
	}},
	{"header folded (obs-fold)", func(r *rand.Rand, q *request) bool {
		q.headers = append(q.headers, "X-Folded: a", "\tb")
		return true
	}},
	{"Transfer-Encoding and Content-Length", func(r *rand.Rand, q *request) bool {
		q.headers = append(q.headers, "Content-Length: "+strconv.Itoa(len(q.body)))
		return q.chunked
	}},
	{"chunked on HTTP/1.0", func(r *rand.Rand, q *request) bool {
		q.version = "HTTP/1.0"
		return q.chunked
	}},
	{"a coding before chunked", func(r *rand.Rand, q *request) bool {
		for i, h := range q.headers {
			if h == "Transfer-Encoding: chunked" {
				q.headers[i] = "Transfer-Encoding: gzip, chunked"
			}
		}
		return q.chunked
	}},
	{"two different Content-Lengths", func(r *rand.Rand, q *request) bool {
		q.headers = append(q.headers, "Content-Length: "+strconv.Itoa(len(q.body)+1))
		return !q.chunked && q.method != "GET"
	}},
	{"Content-Length with a sign", func(r *rand.Rand, q *request) bool {
		for i, h := range q.headers {
			if strings.HasPrefix(h, "Content-Length: ") {
				q.headers[i] = "Content-Length: +" + strings.TrimPrefix(h, "Content-Length: ")
				return true
			}
		}
		return false
	}},
	{"space before a header's colon", func(r *rand.Rand, q *request) bool {
		q.headers = append(q.headers, "X-Space : v")
		return true
	}},
	{"NUL in a header value", func(r *rand.Rand, q *request) bool {
		q.headers = append(q.headers, "X-Nul: a\x00b")
		return true
	}},
	{"body cut short, then FIN", func(r *rand.Rand, q *request) bool {
		q.truncateBy = 1 + int(r.UintN(4))
		return len(q.body) > 4
	}},
}

// setSize changes one chunk's size line.
func (q *request) setSize(r *rand.Rand, f func(string) string) bool {
	which := int(r.UintN(uint(len(q.chunks))))
	orig := q.sizeLine
	q.sizeLine = func(i, size int, ext string) string {
		if i == which {
			return f(strconv.FormatInt(int64(size), 16)) + ext
		}
		return orig(i, size, ext)
	}
	return true
}

// interesting are the bytes a random mutation puts in: HTTP/1's framing
// characters.
const interesting = "\r\n\t :;,0123456789abcdefABCDEF+-xX\x00\x7f"

// scramble changes one to three random bytes of the request (a flip, an
// insertion, a deletion, a copy of a piece), outside the request target so
// that the app's record of it stays recognisable.
func scramble(r *rand.Rand, b []byte, protect int) []byte {
	out := append([]byte(nil), b...)
	for n := 1 + int(r.UintN(3)); n > 0 && len(out) > protect+1; n-- {
		at := protect + int(r.UintN(uint(len(out)-protect)))
		c := interesting[r.UintN(uint(len(interesting)))]
		switch r.UintN(4) {
		case 0:
			out[at] = c
		case 1:
			out = append(out[:at], append([]byte{c}, out[at:]...)...)
		case 2:
			out = append(out[:at], out[at+1:]...)
		default:
			end := min(len(out), at+1+int(r.UintN(8)))
			out = append(out[:end], append(append([]byte(nil), out[at:end]...), out[end:]...)...)
		}
	}
	return out
}

func generate(r *rand.Rand, n int) testCase {
	id := fmt.Sprintf("%x-%d", r.Uint32(), n)
	q := newRequest(r, id)
	c := testCase{id: id, kind: valid}
	switch roll := r.UintN(10); {
	case roll < 2:
	case roll < 6:
		for tries := 0; tries < 20; tries++ {
			m := mutations[r.UintN(uint(len(mutations)))]
			if m.apply(r, q) {
				c.kind, c.mutation = invalid, m.name
				break
			}
			q = newRequest(r, id)
		}
		if c.mutation == "body cut short, then FIN" {
			// A canary would only complete it: the FIN ends it instead.
			c.halfClose, c.noCanary = true, true
		}
	default:
		c.kind, c.mutation = unknown, "random bytes"
		b := q.bytes()
		protect := len(q.method) + 1 + len(q.target)
		c.request = scramble(r, b, protect)
	}
	if c.request == nil {
		c.request = q.bytes()
	}
	if !c.halfClose && r.UintN(5) == 0 {
		c.halfClose = true
	}
	return c
}
