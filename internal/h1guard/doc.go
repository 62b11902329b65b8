// Package h1guard keeps from Go's HTTP/1 server the requests whose framing
// a proxy in front could read differently (request smuggling: the proxy
// takes one request for two, or two for one, and the next user's request
// on a pooled connection is joined to an attacker's). It refuses
// Transfer-Encoding with Content-Length, Transfer-Encoding on HTTP/1.0,
// any Transfer-Encoding but a single "chunked", headers folded onto
// continuation lines (obs-fold), Content-Length values that are not one
// number, and chunked bodies that are not framed exactly as RFC 9112 says
// (a size that is not 1 to 16 hex digits, a chunk not followed by CRLF, a
// bare LF or CR, a trailer line that is not a header). A head longer than
// the server reads is refused at once, with 414 or 431.
//
// Go's own parser is not enough: it accepts some of these by itself. It
// frames Content-Length with Transfer-Encoding: chunked as chunked and
// keeps the connection, unfolds an obs-folded Transfer-Encoding into a
// working chunked body, and takes a folded trailer line. Nor can a handler
// tell: it sees the request as Go read it, the Content-Length dropped and
// the fold undone.
//
// So the guard wraps the listener (NewListener): it reads request heads
// before Go does and follows each message's framing to find the next one.
// A refused head reaches Go as a malformed request line, which Go answers
// with 400, closing the connection after; a refused chunk line reaches Go
// as a malformed one, which ruvoy's handler answers with 400 and a closed
// connection. Nothing after a refusal reaches Go. After a 101 answer to an
// Upgrade request the bytes are another protocol's and pass. HTTP/2
// passes through untouched, unless the server speaks no cleartext HTTP/2
// (Config.NoH2C).
//
// Over TLS (connections that tell their ConnectionState, as *tls.Conn
// does) it reads the decrypted bytes, and holds them to the same rules: a connection whose client chose HTTP/2 by
// ALPN passes; any other must speak HTTP/1. Under TLS (wrapping the
// listener TLS wraps), it sees handshakes and lets them pass unguarded
// (Config.BeforeTLS hears of it).
package h1guard
