package ruvoy

import (
	"time"

	"go.uber.org/zap"
)

// What a stop says, in the server's log (its format, its output), as
// Puma's "Gracefully stopping" does: Stopping when the signal arrives,
// Stopped once the VM is cleaned up, with the exit status. Caddy's own
// last words ("exiting") say nothing of the requests.

// Stopping announces a stop: the server serves on for drain (the health
// check answering 503), then the listeners close, and the requests in
// flight may finish within grace (0: without a limit).
func (rt *Runtime) Stopping(signal string, drain, grace time.Duration) {
	limit := "without a time limit"
	if grace > 0 {
		limit = "for up to " + grace.String()
	}
	first := ""
	if drain > 0 {
		first = "serving on for " + drain.String() + " while the health check answers 503, then "
	}
	rt.log().Warn("ruvoy: gracefully stopping: "+first+"no new connections; the requests in flight may finish "+limit,
		zap.String("signal", signal), zap.Int("requests", rt.Stats().Requests), zap.Duration("drain", drain), zap.Duration("grace", grace))
}

// Stopped says how the stop ended, with the process's exit status
// (code, from Shutdown).
func (rt *Runtime) Stopped(code int) {
	status := zap.Int("exit_status", code)
	switch code {
	case 0:
		rt.log().Info("ruvoy: stopped: every request finished; the app's at_exit hooks ran", status)
	case ExitCutShort:
		rt.log().Warn("ruvoy: stopped: requests still running after the grace period were cut short (Ruvoy::Shutdown)", status)
	case ExitVMHeld:
		rt.log().Error("ruvoy: stopped: Ruby code held the VM thread; the app's at_exit hooks did not run", status)
	default:
		rt.log().Error("ruvoy: stopped: Ruby's cleanup failed (an at_exit hook raised or exited)", status)
	}
}
