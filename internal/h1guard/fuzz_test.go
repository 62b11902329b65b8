package h1guard

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzGuard feeds arbitrary client bytes through the guard, read in
// arbitrary pieces, and checks that
//   - Go gets a prefix of what the client sent, then at most a refusal;
//   - the pieces the bytes arrive in change only where a refusal comes
//     (a body that came with its head is judged with it), not whether;
//   - every request head Go's own parser finds in what the guard passed
//     starts where the guard checked a head: the two never disagree on
//     where a request begins, so no head reaches Go unchecked.
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\nGET /followup HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n y\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\nGET / HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(seed), uint8(0), uint8(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		heads := map[int64]bool{}
		c := &guardConn{Conn: &scripted{data: in}, onHead: func(at int64) { heads[at] = true }}
		out, _ := io.ReadAll(bufio.NewReaderSize(c, 4096))
		whole := string(out)
		split := guarded(string(in), int(a)%64+1, int(b)%64+1)
		// A refusal is bytes the client did not send.
		refused := func(out string) bool { return !strings.HasPrefix(string(in), out) }
		if refused(whole) != refused(split) {
			t.Fatalf("the pieces changed whether the guard refuses:\nwhole %q\nsplit %q", whole, split)
		}
		passed := whole
		if !strings.HasPrefix(string(in), whole) {
			for _, marker := range []string{refusedBody, refusedHead} {
				if strings.HasSuffix(passed, marker) {
					passed = strings.TrimSuffix(passed, marker)
					break
				}
			}
		}
		if !strings.HasPrefix(string(in), passed) {
			t.Fatalf("Go got bytes the client did not send:\nin  %q\nout %q", in, whole)
		}
		counted := &countingReader{r: strings.NewReader(passed)}
		br := bufio.NewReader(counted)
		for {
			at := int64(counted.n - br.Buffered())
			if br.Buffered() == 0 {
				if _, err := br.Peek(1); err != nil {
					return
				}
				at = int64(counted.n - br.Buffered())
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if !heads[at] {
				t.Fatalf("Go read a request head at %d the guard did not check: %q", at, passed[at:])
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
		}
	})
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
