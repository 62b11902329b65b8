package serve

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/host"

	"go.uber.org/zap"
)

// What a stop says, as Puma's "Gracefully stopping" and "Goodbye!" do:
// Stopping when the signal arrives, if the stop has to wait (a drain
// delay, requests in flight); Stopped once the VM is cleaned up, in one
// line: the signal, the requests it let finish or cut short, the exit
// status. Caddy's own last words ("exiting") say nothing of the requests.
// They go to the console when the command line has one (SetConsole), to
// the log otherwise.

// stopState is what Stopping saw, for Stopped.
type stopState struct {
	signal   atomic.Pointer[string]
	inFlight atomic.Int64 // requests the server held when the signal came
	cut      atomic.Int64 // requests Ruvoy::Shutdown cut short
	console  atomic.Pointer[zap.Logger]
	after    atomic.Pointer[func()]
}

// SetConsole sends the stop's lines to l instead of the log (the command
// line's console, where the start was told), and has after run once the
// last of them is written (nil: nothing).
func (rt *Runtime) SetConsole(l *zap.Logger, after func()) {
	rt.stop.console.Store(l)
	if after != nil {
		rt.stop.after.Store(&after)
	}
}

// stopLog is where the stop's lines go.
func (rt *Runtime) stopLog() *zap.Logger {
	if l := rt.stop.console.Load(); l != nil {
		return l
	}
	return rt.log()
}

// Stopping announces a stop: the server serves on for drain (the health
// check answering 503), then the listeners close, and the requests in
// flight may finish within grace (0: without a limit). A stop with
// nothing to wait for is told by Stopped alone.
func (rt *Runtime) Stopping(signal string, drain, grace time.Duration) {
	rt.stop.signal.Store(&signal)
	n := rt.streams.inUse() // in this process's VM, its workers' or waiting for one
	rt.stop.inFlight.Store(int64(n))
	if n == 0 && drain == 0 {
		return
	}
	limit := "without a time limit"
	if grace > 0 {
		limit = "for up to " + grace.String()
	}
	first := ""
	if drain > 0 {
		first = "serving on for " + drain.String() + " while the health check answers 503, then "
	}
	rt.stopLog().Warn(fmt.Sprintf("ruvoy: gracefully stopping (%s): %sno new connections; %s may finish %s", signal, first, requests(n, "in flight"), limit),
		zap.String("signal", signal), zap.Int("requests", n), zap.Duration("drain", drain), zap.Duration("grace", grace))
}

// requests is "n requests" and what they are, in words.
func requests(n int, what string) string {
	switch n {
	case 0:
		return "no request " + what
	case 1:
		return "the request " + what
	}
	return fmt.Sprintf("the %d requests %s", n, what)
}

// Stopped says, in one line, how the stop ended, with the process's exit
// status (code, from Shutdown).
func (rt *Runtime) Stopped(code int) {
	how := "stopped"
	fields := []zap.Field{}
	if s := rt.stop.signal.Load(); s != nil {
		how = "stopped (" + *s + ")"
		fields = append(fields, zap.String("signal", *s))
	}
	n := int(rt.stop.inFlight.Load())
	fields = append(fields, zap.Int("requests", n), zap.Int("exit_status", code))
	line := func(s string) string { return fmt.Sprintf("ruvoy: %s: %s; exit status %d", how, s, code) }
	log := rt.stopLog()
	switch code {
	case 0:
		done := "every request finished"
		if n > 0 {
			done = requests(n, "in flight finished")
		}
		log.Info(line(done+"; the app's at_exit hooks ran"), fields...)
	case host.ExitCutShort:
		// A worker counts its own; the front end knows only that some were.
		cut := "requests still running after the grace period were cut short"
		switch n := rt.stop.cut.Load(); n {
		case 0:
		case 1:
			cut = "the request still running after the grace period was cut short"
		default:
			cut = fmt.Sprintf("the %d requests still running after the grace period were cut short", n)
		}
		log.Warn(line(cut+" (Ruvoy::Shutdown)"), fields...)
	case host.ExitVMHeld:
		log.Error(line("Ruby code held the VM thread; the app's at_exit hooks did not run"), fields...)
	default:
		log.Error(line("Ruby's cleanup failed (an at_exit hook raised or exited)"), fields...)
	}
	if after := rt.stop.after.Load(); after != nil {
		(*after)()
	}
}
