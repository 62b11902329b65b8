// Command nethttp serves a rackup with the ruvoy runtime under Go's plain
// net/http server, without Caddy. It is a benchmark diagnostic: the gap
// between it and ruvoy is what Caddy's handler chain costs per request.
//
//	ruvoy-nethttp -addr 127.0.0.1:3000 config.ru
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3000", "address to listen on")
	env := flag.String("e", "production", "RACK_ENV")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ruvoy-nethttp [-addr HOST:PORT] [-e ENV] config.ru")
		os.Exit(2)
	}
	rt := serve.Start(serve.Options{Program: "ruvoy-nethttp"})
	app, err := rt.Load(flag.Arg(0), *env, serve.AppOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: *addr, Handler: app, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	app.Close()
	rt.Shutdown()
}
