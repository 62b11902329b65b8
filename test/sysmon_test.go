package test

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The server runs with GODEBUG's schedtrace set, so that Go's sysmon never
// sleeps deeply (cmd/ruvoy/sysmon.go): the binary starts itself again with
// it, in the same process. The app, and the workers, get the GODEBUG the
// user gave, or none; RUVOY_SYSMON_AWAKE=0, or a schedtrace of the user's
// own, leaves the runtime as it is.
func TestSysmonAwake(t *testing.T) {
	// The cases give their own GODEBUG, or none: not the tests' (the
	// servers inherit this process's environment).
	if _, ok := os.LookupEnv("GODEBUG"); ok {
		t.Setenv("GODEBUG", "") // restored when the test ends
		os.Unsetenv("GODEBUG")
	}
	const awake = "schedtrace=2147483647"
	for _, c := range []struct {
		name   string
		env    []string
		args   []string
		atExec string // the server's GODEBUG at exec ("": none)
		app    string // what the app answers
	}{
		{"default", nil, nil, awake, "no GODEBUG\n"},
		{"the user's GODEBUG", []string{"GODEBUG=madvdontneed=1"}, nil, "madvdontneed=1," + awake, "GODEBUG=madvdontneed=1\n"},
		{"an empty GODEBUG", []string{"GODEBUG="}, nil, awake, "GODEBUG=\n"},
		{"off", []string{"RUVOY_SYSMON_AWAKE=0"}, nil, "", "no GODEBUG\n"},
		{"the user's schedtrace", []string{"GODEBUG=schedtrace=600000"}, nil, "schedtrace=600000", "GODEBUG=schedtrace=600000\n"},
		{"a worker", nil, []string{"-w", "1"}, awake, "no GODEBUG\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startEnv(t, c.env, append(c.args, app("godebug.ru"))...)
			if got := s.get(t, "/").body; got != c.app {
				t.Errorf("the app saw %q, want %q", got, c.app)
			}
			// exec keeps the pid: the environment the runtime started with
			if got := execGodebug(t, s.cmd.Process.Pid); got != c.atExec {
				t.Errorf("the server's GODEBUG at exec is %q, want %q", got, c.atExec)
			}
			if len(c.args) > 0 {
				pids := workerPids(t, s)
				if len(pids) != 1 {
					t.Fatalf("%d workers, want 1", len(pids))
				}
				if got := execGodebug(t, pids[0]); got != "" {
					t.Errorf("the worker's GODEBUG at exec is %q, want none", got)
				}
			}
		})
	}
}

// execGodebug is the GODEBUG process pid was exec'd with ("": none).
func execGodebug(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v
		}
	}
	return ""
}
