// Command plain is Go's net/http answering by itself: no Caddy, no Ruby.
// It is the floor of the HTTP layer ruvoy is built on, for the scenarios
// whose goals sit near it (one connection, 1 MiB bodies): what a server on
// net/http can reach on this machine at all.
package main

import (
	"bytes"
	"flag"
	"log"
	"net/http"
	"strconv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	hello := []byte("hello world\n")
	mib := bytes.Repeat([]byte("x"), 1<<20)
	answer := func(body []byte, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body) // one write, as Puma writes a String body
		}
	}
	http.Handle("/", answer(hello, "text/plain"))
	http.Handle("/1mib", answer(mib, "application/octet-stream"))
	log.Fatal(http.ListenAndServe(*addr, nil))
}
