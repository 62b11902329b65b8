package main

import (
	"os"
	"strings"
	"syscall"
)

// sysmonAwakeEnv set to 0 leaves Go's sysmon as Go starts it.
const sysmonAwakeEnv = "RUVOY_SYSMON_AWAKE"

// sysmonMarkEnv marks the re-executed process and carries the GODEBUG it
// restores: "1:" and the value, or "0:" when none was set.
const sysmonMarkEnv = "RUVOY_SYSMON_GODEBUG"

// sysmonTrace is the longest schedtrace period Go takes (ms, an int32):
// about 25 days, so the trace line itself stays out of the log (once at
// start only on a host up for longer; docs/configuration.md).
const sysmonTrace = "2147483647"

// keepSysmonAwake starts the server again (exec, same pid and descriptors)
// with GODEBUG's schedtrace set. Go's sysmon thread sleeps deeply once
// every processor is idle, and the next system call or cgo call wakes it
// (under Go's scheduler lock), after which it naps 20 µs at a time for a
// millisecond. A server between requests is idle that way all the time:
// at one connection each request paid that wake-up, ~14% of the process's
// CPU (docs/benchmarks.md, "Go's sysmon"). With schedtrace set, sysmon
// never sleeps deeply; it naps up to 10 ms at a time instead, ~100
// wake-ups a second at rest.
//
// In the re-executed process it puts GODEBUG back as it was, so the app,
// its children and the workers (whose Go side is idle between frames and
// is better off with the deep sleep) get the user's own.
func keepSysmonAwake() {
	if mark, ok := os.LookupEnv(sysmonMarkEnv); ok {
		os.Unsetenv(sysmonMarkEnv)
		if orig, set := strings.CutPrefix(mark, "1:"); set {
			os.Setenv("GODEBUG", orig)
		} else {
			os.Unsetenv("GODEBUG")
		}
		return
	}
	orig, set := os.LookupEnv("GODEBUG")
	if os.Getenv(sysmonAwakeEnv) == "0" || strings.Contains(orig, "schedtrace=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	godebug, mark := "schedtrace="+sysmonTrace, "0:"
	if set {
		mark = "1:" + orig
		if orig != "" {
			godebug = orig + "," + godebug
		}
	}
	env := []string{"GODEBUG=" + godebug, sysmonMarkEnv + "=" + mark}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	syscall.Exec(exe, os.Args, env) // returns only if it failed: serve as is
}
