package wire

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

func TestStringRoundTrip(t *testing.T) {
	var b []byte
	b = AppendString(b, "")
	b = AppendString(b, []byte("bytes"))
	b = AppendAbsent(b)
	b = AppendString(b, "x\x00y")
	want := [][]byte{{}, []byte("bytes"), nil, []byte("x\x00y")}
	for i, w := range want {
		s, rest, ok := ReadString(b)
		if !ok || !bytes.Equal(s, w) || (w == nil) != (s == nil) {
			t.Fatalf("string %d: %q %v", i, s, ok)
		}
		b = rest
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left", len(b))
	}
	// A length past the end is refused, not read.
	if _, _, ok := ReadString([]byte{5, 0, 0, 0, 'a'}); ok {
		t.Fatal("read a string longer than its payload")
	}
	if got := ReadStrings(append(AppendString(nil, "a"), 9, 0, 0, 0, 'b')); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("ReadStrings read %q past a cut string", got)
	}
}

func TestUpstreamCallAndReply(t *testing.T) {
	p := []byte{0xe8, 3, 0, 0} // 1000 ms
	for _, s := range []string{"users", "POST", "/v1/x?y=1"} {
		p = AppendString(p, s)
	}
	p = append(p, 2, 0)
	p = AppendString(AppendString(p, "x-a"), "1")
	p = AppendString(AppendString(p, "X-A"), "2")
	p = append(p, "body"...)
	c, ok := ReadUpstreamCall(p)
	if !ok || c.TimeoutMS != 1000 || c.Upstream != "users" || c.Method != "POST" || c.Path != "/v1/x?y=1" ||
		!reflect.DeepEqual(c.Header, http.Header{"X-A": {"1", "2"}}) || string(c.Body) != "body" {
		t.Fatalf("read %+v", c)
	}
	for n := 0; n < len(p)-len("body"); n++ {
		if _, ok := ReadUpstreamCall(p[:n]); ok {
			t.Fatalf("read a call cut at %d", n)
		}
	}
	r := AppendUpstreamReply(nil, 404, http.Header{"A": {"1", "2"}}, []byte("nope"))
	want := append([]byte{0x94, 1, 2, 0}, AppendString(AppendString(AppendString(AppendString(nil, "A"), "1"), "A"), "2")...)
	if !bytes.Equal(r, append(want, "nope"...)) {
		t.Fatalf("reply %q", r)
	}
}

func TestHeaderNamesAndCodes(t *testing.T) {
	if HeaderNames[0] != "" || len(headerCodes) != len(HeaderNames)-1 {
		t.Fatal("code 0 must be none, every other name once")
	}
	for name, code := range headerCodes {
		if HeaderNames[code] != name || http.CanonicalHeaderKey(name) != name {
			t.Fatalf("%s: code %d, or not canonical (Go looks headers up canonical)", name, code)
		}
	}
	b := AppendHeader(nil, "X-A-b", []string{"1", "2"}, ", ")
	if want := "\x00\x00\x0a\x00HTTP_X_A_B\x04\x00\x00\x001, 2"; string(b) != want {
		t.Fatalf("%q", b)
	}
}

func FuzzReadResponseHead(f *testing.F) {
	f.Add([]byte{})
	f.Add(append(make([]byte, RespHeadersAt), "body"...))
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := ReadResponseHead(p)
		if err != nil {
			return
		}
		n := RespHeadersAt + len(h.Body)
		for _, kv := range h.Headers {
			n += 6 + len(kv[0]) + len(kv[1])
		}
		if n != len(p) {
			t.Fatalf("read %d of %d bytes", n, len(p))
		}
	})
}

func FuzzReadUpstreamCall(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		if c, ok := ReadUpstreamCall(p); ok && len(c.Body) > len(p) {
			t.Fatal("body longer than the payload")
		}
	})
}

func FuzzReadStrings(f *testing.F) {
	f.Add(AppendString(AppendString(nil, "msg"), "k"))
	f.Fuzz(func(t *testing.T, p []byte) {
		var again []byte
		for _, s := range ReadStrings(p) {
			again = AppendString(again, s)
		}
		if !bytes.HasPrefix(p, again) && len(again) > 0 {
			t.Fatal("strings read are not what the payload starts with")
		}
	})
}
