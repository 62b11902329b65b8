package h1guard

import (
	"strings"
	"testing"
)

// The chunked framing the guard passes and refuses; a refused body reaches
// Go as a line it cannot parse, and nothing after it does.
func TestGuardChunkedFraming(t *testing.T) {
	head := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	next := "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
	passed := []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;ext=1\r\nhello\r\n0\r\n\r\n",
		"5 \t\r\nhello\r\n0\r\n\r\n",
		"A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n",
		"000000000000005\r\nhello\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\nX-Trailer: yes\r\nOther: a\tb\r\n\r\n",
	}
	for _, body := range passed {
		for _, pieces := range [][]int{nil, {1}, {3, 7}} {
			if got := guarded(head+body+next, pieces...); got != head+body+next {
				t.Errorf("%q in pieces %v: got %q, want it passed whole", body, pieces, got)
			}
		}
	}
	refused := []struct{ body, passed string }{
		{"Z\r\nhello\r\n0\r\n\r\n", ""},
		{"-5\r\nhello\r\n0\r\n\r\n", ""},
		{"0x5\r\nhello\r\n0\r\n\r\n", ""},
		{"00000000000000005\r\nhello\r\n0\r\n\r\n", ""}, // 17 digits
		{"5 ;ext\r\nhello\r\n0\r\n\r\n", ""},
		{"\r\nhello\r\n0\r\n\r\n", ""},
		{"5\nhello\r\n0\r\n\r\n", ""},         // bare LF
		{"5\r\r\nhello\r\n0\r\n\r\n", ""},     // bare CR
		{"5\r\nhello0\r\n\r\n", "5\r\nhello"}, // no CRLF after the data
		{"3\r\nabcXX0\r\n\r\n", "3\r\nabc"},   // other bytes after the data
		{"5\r\nhello\r\n0\r\nno colon\r\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5\r\nhello\r\n0\r\n folded: x\r\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5\r\nhello\r\n0\r\nX: a\n\r\n", "5\r\nhello\r\n0\r\n"},
		{"5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n", ""},
		{"5\r\nhello\r\n0\r\n" + strings.Repeat("X-A: b\r\n", 600) + "\r\n", "5\r\nhello\r\n0\r\n" + strings.Repeat("X-A: b\r\n", 512)},
	}
	// A body that comes with its head is judged with it: the head is
	// refused, and no handler runs. One that comes later is refused where
	// it breaks the rules.
	for _, c := range refused {
		for _, pieces := range [][]int{nil, {1}, {3, 7}} {
			got := guarded(head+c.body+next, pieces...)
			if got != refusedHead && got != head+c.passed+refusedBody {
				t.Errorf("%.40q in pieces %v: got %.120q, want the head refused or %.120q", c.body, pieces, got, head+c.passed+refusedBody)
			}
			if pieces == nil && got != refusedHead {
				t.Errorf("%.40q, whole: got %.120q, want the head refused", c.body, got)
			}
		}
	}
}
