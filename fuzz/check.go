package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// reference is what Go's own request parser makes of the bytes a client
// sends: the requests it reads from them, one after another, as Go's server
// does (which after a POST skips up to 4 CR or LF bytes first), until one
// cannot be read whole; nothing after that one counts.
type parsed struct {
	framed bool // read whole: the next request starts where it ends
	valid  bool // framed, and a request the server accepts (Host present)
	closes bool // the request asks the server to close after it
	end    int  // where it ends in the bytes
	method string
	uri    string
	body   []byte
}

func parseAll(b []byte) []parsed {
	counted := &countingReader{r: bytes.NewReader(b)}
	br := bufio.NewReader(counted)
	var out []parsed
	last := ""
	for {
		if last == "POST" {
			peek, _ := br.Peek(4)
			n := 0
			for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
				n++
			}
			br.Discard(n)
		}
		if _, err := br.Peek(1); err != nil {
			return out
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return append(out, parsed{})
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return append(out, parsed{})
		}
		p := parsed{framed: true, valid: !req.ProtoAtLeast(1, 1) || req.Host != "", closes: req.Close,
			end: counted.n - br.Buffered(), method: req.Method, uri: req.RequestURI, body: body}
		out = append(out, p)
		if p.closes {
			return out
		}
		last = req.Method
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// seen is the answer fuzz/app.ru gives for a request.
func (p parsed) seen() string {
	sum := sha256.Sum256(p.body)
	return fmt.Sprintf("%s %s %d %s", p.method, p.uri, len(p.body), hex.EncodeToString(sum[:]))
}

// An answer as the client read it.
type answer struct {
	status int
	close  bool
	body   string
}

type outcome struct {
	answers []answer
	end     string // how the connection ended: eof, reset, timeout
	broken  bool   // the bytes after the last answer were not HTTP
}

// canaryPath is requested after each case on the same connection: it must
// reach the app only when the case was one whole valid request.
func canaryPath(id string) string { return "/canary/" + id }

// withCanary is what the client sends: the case, then the canary.
func withCanary(c testCase) []byte {
	if c.noCanary {
		return c.request
	}
	canary := "GET " + canaryPath(c.id) + " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n"
	return append(append([]byte(nil), c.request...), canary...)
}

func send(addr string, c testCase, wait time.Duration) (outcome, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return outcome{}, err
	}
	defer conn.Close()
	if _, err := conn.Write(withCanary(c)); err != nil {
		return outcome{end: "reset"}, nil
	}
	if c.halfClose {
		conn.(*net.TCPConn).CloseWrite()
	}
	var raw []byte
	buf := make([]byte, 32<<10)
	var o outcome
	for {
		conn.SetReadDeadline(time.Now().Add(wait))
		n, err := conn.Read(buf)
		raw = append(raw, buf[:n]...)
		if err == nil {
			continue
		}
		switch {
		case errors.Is(err, io.EOF):
			o.end = "eof"
		case errors.Is(err, syscall.ECONNRESET):
			o.end = "reset"
		case errors.Is(err, os.ErrDeadlineExceeded):
			o.end = "timeout"
		default:
			o.end = err.Error()
		}
		break
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		if _, err := br.Peek(1); err != nil {
			break
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			o.broken = true
			break
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			o.broken = true
		}
		o.answers = append(o.answers, answer{status: res.StatusCode, close: res.Close, body: string(body)})
	}
	return o, nil
}

// check holds one case's outcome against the invariants, with Go's parser
// over the same bytes (the case, then the canary) as the reference:
//
//  1. an invalid request (known to be, or refused by the reference) never
//     gets a 2xx;
//  2. no request reaches the app that the reference does not read at that
//     place: every 2xx answer is the app's account of the reference's
//     request at the same position, and the canary after a request that is
//     not one whole valid request never reaches the app;
//  3. a whole valid request gets its answer (the app's, or a refusal), and
//     so does the canary after it unless the answer closed the connection.
func check(c testCase, sent []byte, o outcome, canarySeen bool) []string {
	var problems []string
	ref := parseAll(sent)
	firstValid := len(ref) > 0 && ref[0].valid
	exact := len(ref) > 0 && ref[0].framed && ref[0].end == len(c.request)
	for i, a := range o.answers {
		if a.status < 200 || a.status >= 300 {
			break // a refusal: what follows is not the app's
		}
		switch {
		case i == 0 && (c.kind == invalid || !firstValid):
			problems = append(problems, fmt.Sprintf("invalid request answered %d", a.status))
		case i >= len(ref) || !ref[i].valid:
			problems = append(problems, fmt.Sprintf("answer %d is the app's (%q), but the reference reads no request there", i, a.body))
		case a.body != ref[i].seen():
			problems = append(problems, fmt.Sprintf("answer %d: the app saw %q, the reference reads %q", i, a.body, ref[i].seen()))
		}
		if len(problems) > 0 {
			return problems
		}
	}
	if canarySeen && (c.kind == invalid || !exact) {
		canaryRead := false
		for _, p := range ref {
			canaryRead = canaryRead || (p.valid && p.uri == canaryPath(c.id))
		}
		// A known-invalid case's canary may reach the app only where Go's
		// parser frames the case whole (a refusal of ruvoy's own, such as
		// obs-fold, is no desync: the connection then closes).
		if !canaryRead || (c.kind == invalid && !exact) {
			problems = append(problems, "the canary reached the app, but the reference does not read it as a request")
		}
	}
	if !exact || !firstValid || c.kind == invalid {
		return problems
	}
	if len(o.answers) == 0 {
		return append(problems, fmt.Sprintf("a valid request got no answer (connection %s)", o.end))
	}
	if o.broken {
		problems = append(problems, "the answers are not HTTP")
	}
	first := o.answers[0]
	if first.status < 200 || first.status >= 300 {
		if canarySeen {
			problems = append(problems, fmt.Sprintf("the canary reached the app after a %d", first.status))
		}
		return problems
	}
	closes := first.close || ref[0].closes
	switch {
	case closes && canarySeen:
		problems = append(problems, "the canary reached the app after an answer that closed the connection")
	case !closes && !canarySeen:
		problems = append(problems, fmt.Sprintf("the canary after a whole request was lost (connection %s)", o.end))
	}
	return problems
}
