package h1guard

import "net/http"

// refuse hands Go, after what it may already have, bytes it cannot parse
// where it reads next (a request line, a chunk-size line, the CRLF after a
// chunk, a trailer line), and nothing after them.
func (c *guardConn) refuse(marker string) {
	switch marker {
	case refusedLongURI:
		c.answer.Store(http.StatusRequestURITooLong)
	case refusedLongHead:
		c.answer.Store(http.StatusRequestHeaderFieldsTooLarge)
	}
	c.in = append(c.in[:c.ready], marker...)
	c.ready = len(c.in)
	c.state = stateRefused
}

const (
	refusedHead = "REFUSED-BY-RUVOY\r\n\r\n"
	refusedBody = "\x00REFUSED-BY-RUVOY\r\n\r\n"
	// Heads over the limit (headLimit): Go answers these 400 as any
	// refused head, and Write turns that answer into the status RFC 9112
	// wants.
	refusedLongURI  = "REFUSED-BY-RUVOY-414\r\n\r\n"
	refusedLongHead = "REFUSED-BY-RUVOY-431\r\n\r\n"
)

// goBadRequest is Go's answer to a request it cannot parse (net/http's
// conn.serve), which a refused head gets.
const goBadRequest = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"

// answers are what Write sends in place of goBadRequest after a head
// refused for its size.
var answers = map[int32]string{
	http.StatusRequestURITooLong:           "HTTP/1.1 414 URI Too Long\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n414 URI Too Long",
	http.StatusRequestHeaderFieldsTooLarge: "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large",
}
