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
// says how it ended, Runtime.Stopped), and systemd's STATUS says so
// too (sd: nil unless the unit listens).
func announceStop(rt *serve.Runtime, sd *sdNotify, drain, grace time.Duration) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-signals
		signal.Stop(signals)
		name := "SIGTERM" // as Caddy names it in its log
		if sig == syscall.SIGINT {
			name = "SIGINT"
		}
		sd.stop(name)
		rt.Stopping(name, drain, grace)
	}()
}
