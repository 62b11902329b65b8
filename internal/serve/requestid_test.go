package serve

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newRequestID()
		if !uuid.MatchString(id) || seen[id] {
			t.Fatalf("id %q: not a fresh v4 UUID", id)
		}
		seen[id] = true
	}
	for in, want := range map[string]string{
		"abc-123_x@y":            "abc-123_x@y",
		"a b\r\n<c>":             "abc",
		strings.Repeat("x", 300): strings.Repeat("x", 255),
		"   ":                    "",
	} {
		if got := cleanRequestID(in); got != want {
			t.Errorf("cleanRequestID(%q) = %q, want %q", in, got, want)
		}
	}
	r := &http.Request{Header: http.Header{"X-Request-Id": {"  "}}}
	requestID(r)
	if !uuid.MatchString(r.Header.Get("X-Request-Id")) {
		t.Fatalf("an id with nothing usable was kept: %q", r.Header["X-Request-Id"])
	}
	r = &http.Request{Header: http.Header{"X-Request-Id": {"from-proxy", "second"}}}
	requestID(r)
	if got := r.Header["X-Request-Id"]; len(got) != 1 || got[0] != "from-proxy" {
		t.Fatalf("got %q, want the first id alone", got)
	}
}
