package serve

import (
	"net/http"
	"net/textproto"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// earlyHintsReach says whether a 103 Early Hints answer goes to r's
// client; the app sees env["rack.early_hints"] only then (as under Puma,
// where it is absent unless early_hints is set), so Rails does not even
// build its Link lines for others. HTTP/2 and HTTP/3 clients get them:
// browsers act on them there (docs/protocols.md#early-hints). HTTP/1.1
// clients only when the app asks (http1): browsers ignore them there, and
// a client that does not expect a 1xx may take it for the answer
// (Python's http.client did, and lost the session cookie). HTTP/1.0
// clients never (RFC 9110 §15.2).
func earlyHintsReach(r *http.Request, http1 bool) bool {
	return r.ProtoMajor >= 2 || (http1 && r.ProtoAtLeast(1, 1))
}

// earlyHints writes a 103 Early Hints answer with the headers the app gave
// (env["rack.early_hints"]), before its response. None goes once a head is
// set or written, nor to an HTTP/1.0 client, which a 1xx must not reach
// (RFC 9110 §15.2).
func (rs *responder) earlyHints(p []byte) {
	if rs.pending || rs.wroteHead || rs.refused != 0 || !rs.r.ProtoAtLeast(1, 1) {
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
