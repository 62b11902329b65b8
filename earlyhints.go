package ruvoy

import (
	"net/http"
	"net/textproto"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// earlyHints writes a 103 Early Hints answer with the headers the app gave
// (env["rack.early_hints"]), before its response. None goes once a head is
// set or written, nor to an HTTP/1.0 client, which a 1xx must not reach
// (RFC 9110 §15.2).
func (rs *responder) earlyHints(p []byte) {
	if rs.pending || rs.wroteHead || rs.refused != 0 || !rs.req.ProtoAtLeast(1, 1) {
		return
	}
	pairs := wire.ReadStrings(p)
	if len(pairs) < 2 {
		return
	}
	h := rs.w.Header()
	before := map[string][]string{} // what the keys held: the hints are not the response's headers
	for i := 0; i+1 < len(pairs); i += 2 {
		key := textproto.CanonicalMIMEHeaderKey(pairs[i])
		if _, seen := before[key]; !seen {
			before[key] = h[key]
		}
		h[key] = append(h[key], pairs[i+1])
	}
	rs.w.WriteHeader(http.StatusEarlyHints)
	// Go sends the header map as it is with a 1xx, and keeps it.
	for key, values := range before {
		if values == nil {
			delete(h, key)
		} else {
			h[key] = values
		}
	}
}
