package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// announceStop logs, when the first SIGTERM or SIGINT arrives, that the
// server is stopping gracefully, how long it serves on first (drain) and
// how many requests it lets finish
// (Caddy's handler, caddy.TrapSignals, does the stopping; the runtime
// says how it ended, Runtime.Stopped).
func announceStop(rt *serve.Runtime, drain, grace time.Duration) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-signals
		signal.Stop(signals)
		name := "SIGTERM" // as Caddy names it in its log
		if sig == syscall.SIGINT {
			name = "SIGINT"
		}
		rt.Stopping(name, drain, grace)
	}()
}
