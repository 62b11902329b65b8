package h1guard

import (
	"io"
	"net"
	"strings"
	"testing"
)

// Each rule of the package's doc comment, through the guard as a server
// gets it (NewListener): what Go reads, and what the client hears once Go
// answers a refused head. The client's bytes come in pieces, each read
// whole before the next is sent; answer is written after the first.
func TestRules(t *testing.T) {
	const (
		chunkedHead = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
		next        = "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
		upgrade     = "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		smuggle     = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n"
		preface     = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04"
	)
	type rule struct {
		rule   string
		cfg    Config
		tls    bool     // over TLS, where the client chose alpn
		alpn   string   // the protocol the client chose over TLS
		in     []string // what the client sends, piece by piece
		answer string   // what Go writes after the first piece
		want   string   // what Go reads
		hears  string   // what the client hears of Go's 400 for a refused head
	}
	limit := headLimit(1024)
	// body is a chunked body sent after its head: refused where it breaks
	// the rules, after what came of it before (passed).
	body := func(name, b, passed string) rule {
		return rule{rule: name, in: []string{chunkedHead, b + next}, want: chunkedHead + passed + refusedBody}
	}
	refused := func(name, in string) rule {
		return rule{rule: name, in: []string{in + next}, want: refusedHead, hears: "HTTP/1.1 400 Bad Request\r\n"}
	}
	for _, r := range []rule{
		refused("TE with CL", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n"),
		refused("CL with TE", "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"),
		refused("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
		refused("TE gzip, chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
		refused("TE identity", "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n"),
		refused("TE twice", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
		refused("obs-fold", "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n"),
		refused("obs-fold with a tab", "GET / HTTP/1.1\r\nX-A: 1\r\n\tfolded\r\n\r\n"),
		refused("obs-folded TE", "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"),
		refused("CL not a number", "POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
		refused("CL signed", "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc"),
		refused("CL hex", "POST / HTTP/1.1\r\nContent-Length: 0x3\r\n\r\nabc"),
		refused("CL empty", "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n"),
		refused("CL a list", "POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc"),
		refused("CL twice, different", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
		refused("CL past int64", "POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n"),
		refused("a bad chunk size with its head", chunkedHead+"Z\r\nhello\r\n0\r\n\r\n"),
		{rule: "CL twice, equal", in: []string{"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" + next},
			want: "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" + next},
		{rule: "chunked, well framed", in: []string{chunkedHead, "5;x=1\r\nhello\r\n0\r\nT: v\r\n\r\n" + next},
			want: chunkedHead + "5;x=1\r\nhello\r\n0\r\nT: v\r\n\r\n" + next},

		body("chunk size not hex", "Z\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk size negative", "-5\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk size 0x", "0x5\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk size of 17 digits", "00000000000000005\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk size empty", "\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk size line past 4 KiB", "5;"+strings.Repeat("x", 5000)+"\r\nhello\r\n0\r\n\r\n", ""),
		body("chunk not followed by CRLF", "5\r\nhelloXX0\r\n\r\n", "5\r\nhello"),
		body("chunk followed by LF alone", "5\r\nhello\n0\r\n\r\n", "5\r\nhello"),
		body("chunk followed by CR alone", "5\r\nhello\rX0\r\n\r\n", "5\r\nhello"),
		body("bare LF after a chunk size", "5\nhello\r\n0\r\n\r\n", ""),
		body("bare CR in a chunk size line", "5\r\r\nhello\r\n0\r\n\r\n", ""),
		body("bare CR in a chunk extension", "5;a\rb\r\nhello\r\n0\r\n\r\n", ""),
		body("bare LF after a trailer", "5\r\nhello\r\n0\r\nX: a\n\r\n", "5\r\nhello\r\n0\r\n"),
		body("trailer without a colon", "5\r\nhello\r\n0\r\nno colon\r\n\r\n", "5\r\nhello\r\n0\r\n"),
		body("trailer folded", "5\r\nhello\r\n0\r\nX: a\r\n folded\r\n\r\n", "5\r\nhello\r\n0\r\nX: a\r\n"),
		body("trailer with no name", "5\r\nhello\r\n0\r\n: v\r\n\r\n", "5\r\nhello\r\n0\r\n"),
		body("trailer name not a token", "5\r\nhello\r\n0\r\nX Y: v\r\n\r\n", "5\r\nhello\r\n0\r\n"),
		body("trailer value with a control", "5\r\nhello\r\n0\r\nX: a\x01b\r\n\r\n", "5\r\nhello\r\n0\r\n"),
		body("trailers past 4 KiB", "5\r\nhello\r\n0\r\n"+strings.Repeat("X-A: b\r\n", 600)+"\r\n", "5\r\nhello\r\n0\r\n"+strings.Repeat("X-A: b\r\n", 512)),

		{rule: "request line past the limit", cfg: Config{MaxHeaderBytes: 1024}, in: []string{"GET /" + strings.Repeat("a", limit)},
			want: refusedLongURI, hears: "HTTP/1.1 414 URI Too Long\r\n"},
		{rule: "head past the limit", cfg: Config{MaxHeaderBytes: 1024}, in: []string{"GET / HTTP/1.1\r\nX: " + strings.Repeat("b", limit)},
			want: refusedLongHead, hears: "HTTP/1.1 431 Request Header Fields Too Large\r\n"},
		{rule: "head at the limit", cfg: Config{MaxHeaderBytes: 1024}, in: []string{"GET / HTTP/1.1\r\nX: " + strings.Repeat("b", limit-23) + "\r\n\r\n"},
			want: "GET / HTTP/1.1\r\nX: " + strings.Repeat("b", limit-23) + "\r\n\r\n"},

		{rule: "upgrade after 101 passes", in: []string{upgrade, "\x81\x05hello" + smuggle},
			answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", want: upgrade + "\x81\x05hello" + smuggle},
		{rule: "upgrade after 200 stays guarded", in: []string{upgrade, smuggle},
			answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", want: upgrade + refusedHead},

		{rule: "HTTP/2 preface passes", in: []string{preface + smuggle}, want: preface + smuggle},
		{rule: "HTTP/2 preface with NoH2C", cfg: Config{NoH2C: true}, in: []string{preface}, want: refusedHead, hears: "HTTP/1.1 400 Bad Request\r\n"},

		{rule: "TLS, ALPN h2 passes", tls: true, alpn: "h2", in: []string{preface + smuggle}, want: preface + smuggle},
		{rule: "TLS, ALPN h2 without the preface", tls: true, alpn: "h2", in: []string{next}, want: ""},
		{rule: "TLS, ALPN http/1.1 is guarded", tls: true, alpn: "http/1.1", in: []string{smuggle}, want: refusedHead},
		{rule: "TLS, no ALPN is guarded", tls: true, in: []string{smuggle}, want: refusedHead},
		{rule: "TLS, HTTP/2 preface without h2", tls: true, alpn: "http/1.1", in: []string{preface}, want: refusedHead},
	} {
		client := &scripted{}
		var raw net.Conn = client
		if r.tls {
			ts := &tlsScripted{protocol: r.alpn}
			client, raw = &ts.scripted, ts
		}
		accepted, _ := NewListener(&oneConn{raw}, r.cfg).Accept()
		got := ""
		for i, piece := range r.in {
			client.data = []byte(piece)
			out, _ := io.ReadAll(accepted)
			got += string(out)
			if i == 0 && r.answer != "" {
				accepted.Write([]byte(r.answer))
			}
		}
		if got != r.want {
			t.Errorf("%s: Go read %.100q, want %.100q", r.rule, got, r.want)
			continue
		}
		if r.hears != "" {
			client.written.Reset()
			io.WriteString(accepted, goBadRequest)
			if !strings.HasPrefix(client.written.String(), r.hears) {
				t.Errorf("%s: the client heard %q, want %q", r.rule, client.written.String(), r.hears)
			}
		}
		accepted.Close()
	}
}
