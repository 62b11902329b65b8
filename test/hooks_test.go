package test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The app's hooks (Ruvoy.before_fork, on_worker_boot, on_worker_shutdown)
// with test/apps/hooks.ru, which writes a line to HOOKS_LOG each time one
// runs.

// hookEvent is a line of hooks.ru's log.
type hookEvent struct {
	hook  string
	index string // "" for before_fork
	pid   int
}

// hookEvents reads hooks.ru's log, in the order the hooks ran.
func hookEvents(t *testing.T, path string) []hookEvent {
	t.Helper()
	b, _ := os.ReadFile(path)
	var out []hookEvent
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		e := hookEvent{hook: f[0]}
		if len(f) == 3 {
			e.index = f[1]
		}
		e.pid, _ = strconv.Atoi(f[len(f)-1])
		out = append(out, e)
	}
	return out
}

// of is the events of one hook.
func of(events []hookEvent, hook string) []hookEvent {
	var out []hookEvent
	for _, e := range events {
		if e.hook == hook {
			out = append(out, e)
		}
	}
	return out
}

// ranIn says whether hook ran in pid (with index, unless index is "").
func ranIn(events []hookEvent, hook string, pid int, index string) bool {
	return slices.ContainsFunc(events, func(e hookEvent) bool {
		return e.hook == hook && e.pid == pid && (index == "" || e.index == index)
	})
}

// workerSockets asks hooks.ru's /socket until both workers answered:
// for each worker's pid, the socket the app loaded with and the one the
// worker holds now (each a port and the kernel's socket:[inode]).
func workerSockets(t *testing.T, s *server) map[int][2]string {
	t.Helper()
	out := map[int][2]string{}
	for i := 0; i < 200 && len(out) < 2; i++ {
		f := strings.Fields(s.get(t, "/socket").body)
		if len(f) != 5 {
			t.Fatalf("/socket answered %q", f)
		}
		pid, _ := strconv.Atoi(f[0])
		out[pid] = [2]string{f[1] + " " + f[2], f[3] + " " + f[4]}
	}
	if len(out) != 2 {
		t.Fatalf("two workers did not answer: %v", out)
	}
	return out
}

// An app opens a socket while it loads. With --preload, without hooks,
// every forked worker holds the template's socket (one socket, the same
// inode, in every process: a client connection shared so would carry
// every worker's requests and answers mixed); with on_worker_boot opening
// its own (and before_fork closing the template's), each worker has a
// socket of its own, none the template's. Workers started anew load the
// app themselves, each with its own.
func TestClusterHooksSocketPerWorker(t *testing.T) {
	cases := []struct {
		name   string
		env    []string
		args   []string
		shared bool // every worker holds the socket the app loaded with
	}{
		{"preload with the hooks", []string{"HOOKS_REOPEN=1"}, []string{"--preload"}, false},
		{"preload without them", nil, []string{"--preload"}, true},
		{"started anew with the hooks", []string{"HOOKS_REOPEN=1"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{"HOOKS_LOG=" + filepath.Join(t.TempDir(), "hooks")}, c.env...)
			s := startEnv(t, env, append([]string{"-w", "2"}, append(c.args, app("hooks.ru"))...)...)
			sockets := workerSockets(t, s)
			var loaded, now []string
			for _, sock := range sockets {
				loaded = append(loaded, sock[0])
				now = append(now, sock[1])
			}
			t.Logf("loaded with %v, hold %v", loaded, now)
			switch {
			case c.shared:
				equal(t, "the template's socket, held by both workers", now[0]+" / "+now[1], loaded[0]+" / "+loaded[0])
			default:
				if now[0] == now[1] {
					t.Errorf("the two workers hold one socket: %s", now[0])
				}
				for _, l := range loaded {
					if slices.Contains(now, l) {
						t.Errorf("a worker holds the socket the app loaded with (%s): %v", l, now)
					}
				}
			}
			if c.args != nil { // one template loaded the app for both
				equal(t, "the socket the app loaded with", loaded[0], loaded[1])
			}
			equal(t, "exit status", s.stop(), 0)
		})
	}
}

// The hooks run at their moments, with --preload and with workers started
// anew: before_fork once in the template (its pid), before the workers
// boot, and never without --preload; on_worker_boot in each worker, with
// its index, before it serves; a worker killed (SIGKILL) runs no shutdown
// hook, and its replacement boots with the same index; a rolling restart
// (SIGUSR2) boots new workers (with --preload from a new template, which
// runs before_fork again) and each old worker runs on_worker_shutdown as
// it stops; so does a worker replaced under --worker-max-rss, and every
// worker at the server's SIGTERM.
func TestClusterHooksMoments(t *testing.T) {
	for _, mode := range []string{"--preload", "started anew"} {
		t.Run(mode, func(t *testing.T) {
			preload := mode == "--preload"
			log := filepath.Join(t.TempDir(), "hooks")
			// A cap 150 MiB above a small app's worker at rest (YJIT on
			// Ruby 3.1 adds 256 MiB to it), which growing by rest + 300
			// passes, whether the cap reads RSS or, forked, PSS.
			var shape []string
			if preload {
				shape = []string{"--preload"}
			}
			rest := workerRestMiB(t, shape...)
			args := append([]string{"-w", "2", "--worker-max-rss", strconv.Itoa(rest + 150)}, shape...)
			s := startEnv(t, []string{"HOOKS_LOG=" + log}, append(args, app("hooks.ru"))...)
			ev := hookEvents(t, log)
			boots := of(ev, "on_worker_boot")
			equal(t, "boots", len(boots), 2)
			byIndex := map[string]int{}
			for _, b := range boots {
				byIndex[b.index] = b.pid
			}
			if byIndex["0"] == 0 || byIndex["1"] == 0 {
				t.Fatalf("boots %v: want indexes 0 and 1", boots)
			}
			pids := s.pids(t, 40)
			for _, pid := range byIndex {
				if pids[strconv.Itoa(pid)] == 0 {
					t.Errorf("worker %d booted but does not answer (answers: %v)", pid, pids)
				}
			}
			forks := of(ev, "before_fork")
			if preload {
				equal(t, "before_fork runs", len(forks), 1)
				equal(t, "before_fork's process", forks[0].pid, templatePid(t, s))
				equal(t, "before_fork before the boots", ev[0].hook, "before_fork")
			} else {
				equal(t, "before_fork runs", len(forks), 0)
			}

			// A worker killed: no shutdown hook; its replacement boots as 0.
			killed := byIndex["0"]
			syscall.Kill(killed, syscall.SIGKILL)
			eventually(t, 60*time.Second, "worker 0 replaced", func() bool {
				return len(of(hookEvents(t, log), "on_worker_boot")) == 3
			})
			ev = hookEvents(t, log)
			replacement := of(ev, "on_worker_boot")[2]
			equal(t, "the replacement's index", replacement.index, "0")
			if ranIn(ev, "on_worker_shutdown", killed, "") {
				t.Errorf("the killed worker %d ran on_worker_shutdown", killed)
			}
			equal(t, "before_fork after a worker died", len(of(ev, "before_fork")), len(forks))
			byIndex["0"] = replacement.pid

			// A rolling restart.
			old := byIndex
			s.cmd.Process.Signal(syscall.SIGUSR2)
			eventually(t, 60*time.Second, "the old workers stopped", func() bool {
				return syscall.Kill(old["0"], 0) != nil && syscall.Kill(old["1"], 0) != nil
			})
			ev = hookEvents(t, log)
			for index, pid := range old {
				if !ranIn(ev, "on_worker_shutdown", pid, index) {
					t.Errorf("worker %s (%d) stopped by the rolling restart without on_worker_shutdown: %v", index, pid, ev)
				}
			}
			boots = of(ev, "on_worker_boot")
			equal(t, "boots after the restart", len(boots), 5)
			byIndex = map[string]int{}
			for _, b := range boots[3:] {
				byIndex[b.index] = b.pid
			}
			if preload {
				forks = of(ev, "before_fork")
				equal(t, "before_fork after the restart", len(forks), 2)
				equal(t, "the new template's before_fork", forks[1].pid, templatePid(t, s))
			}

			// A worker replaced for its memory.
			grown, _ := strconv.Atoi(s.get(t, "/grow?mib="+strconv.Itoa(rest+300)).body)
			eventually(t, 60*time.Second, "the grown worker replaced", func() bool { return syscall.Kill(grown, 0) != nil })
			ev = hookEvents(t, log)
			if !ranIn(ev, "on_worker_shutdown", grown, "") {
				t.Errorf("worker %d replaced under --worker-max-rss without on_worker_shutdown: %v", grown, ev)
			}
			eventually(t, 60*time.Second, "its replacement booted", func() bool {
				return len(of(hookEvents(t, log), "on_worker_boot")) == 6
			})
			last := of(hookEvents(t, log), "on_worker_boot")[5]
			byIndex[last.index] = last.pid

			// The server's stop.
			equal(t, "exit status", s.stop(), 0)
			ev = hookEvents(t, log)
			for index, pid := range byIndex {
				if !ranIn(ev, "on_worker_shutdown", pid, index) {
					t.Errorf("worker %s (%d) stopped by SIGTERM without on_worker_shutdown: %v", index, pid, ev)
				}
			}
			equal(t, "shutdowns in all", len(of(ev, "on_worker_shutdown")), 5)
		})
	}
}

// In one process (no -w) on_worker_boot runs once, given 0, before the
// process serves, and on_worker_shutdown as it stops; before_fork never.
// A config reload evaluates config.ru again in the same process: its
// hooks neither boot again nor stop twice.
func TestClusterHooksOneProcess(t *testing.T) {
	log := filepath.Join(t.TempDir(), "hooks")
	s := startEnv(t, []string{"HOOKS_LOG=" + log}, app("hooks.ru"))
	ev := hookEvents(t, log)
	equal(t, "the hooks that ran at the start", len(ev), 1)
	equal(t, "on_worker_boot", ev[0], hookEvent{"on_worker_boot", "0", s.cmd.Process.Pid})
	equal(t, "the process serves", s.get(t, "/pid").body, strconv.Itoa(s.cmd.Process.Pid))
	s.cmd.Process.Signal(syscall.SIGUSR2)
	s.waitStderr(t, `"msg":"ruvoy: reloaded"`, 1)
	equal(t, "a request after the reload", s.get(t, "/pid").status, 200)
	equal(t, "the hooks that ran by the reload", len(hookEvents(t, log)), 1)
	equal(t, "exit status", s.stop(), 0)
	ev = hookEvents(t, log)
	equal(t, "the hooks that ran in all", len(ev), 2)
	equal(t, "on_worker_shutdown", ev[1], hookEvent{"on_worker_shutdown", "0", s.cmd.Process.Pid})
}

// A boot hook that raises is a boot failure, never a hang: at the start
// the server exits 1 with what the block raised, its backtrace first, as
// for an app that failed to load, and leaves no process behind. A shutdown
// hook's exception is logged, with its backtrace, and the stop goes on.
func TestClusterHooksRaise(t *testing.T) {
	cases := []struct {
		hook string
		args []string
	}{
		{"on_worker_boot", nil},
		{"on_worker_boot", []string{"-w", "2"}},
		{"on_worker_boot", []string{"-w", "2", "--preload"}},
		{"before_fork", []string{"-w", "2", "--preload"}},
	}
	for _, c := range cases {
		t.Run(c.hook+" "+modeName(c.args), func(t *testing.T) {
			port := freePort(t)
			mark := "RUVOY_TEST_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
			env := []string{mark, "HOOKS_LOG=" + filepath.Join(t.TempDir(), "hooks"), "HOOKS_RAISE=" + c.hook}
			s := launchIn(t, "", env, port, append(append([]string{"-p", port}, c.args...), app("hooks.ru"))...)
			equal(t, "exit status", s.wait(t, 60*time.Second), 1)
			stderr := s.stderr.String()
			mustContain(t, "stderr", stderr, "ruvoy: "+app("hooks.ru")+" failed to load: Ruvoy."+c.hook+"'s block raised: boom in "+c.hook+" (RuntimeError)\n\t")
			mustContain(t, "stderr", stderr, "hooks.ru:")
			mustContain(t, "stderr", stderr, "boom in "+c.hook+" (RuntimeError)")
			environs, _ := filepath.Glob("/proc/[0-9]*/environ")
			for _, f := range environs {
				if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(mark)) {
					t.Errorf("a process was left behind: %s", f)
				}
			}
		})
	}

	// A replacement whose boot hook raises fails to start, with the
	// error, and is retried after the crash loop's wait; the other worker
	// serves meanwhile, and once the hook passes the slot is filled.
	for _, mode := range [][]string{nil, {"--preload"}} {
		t.Run("a replacement's on_worker_boot "+modeName(append([]string{"-w", "2"}, mode...)), func(t *testing.T) {
			dir := t.TempDir()
			fails := filepath.Join(dir, "fails")
			env := []string{"HOOKS_LOG=" + filepath.Join(dir, "hooks"), "HOOKS_RAISE=on_worker_boot", "HOOKS_RAISE_IF=" + fails}
			s := startEnv(t, env, append(append([]string{"-w", "2"}, mode...), app("hooks.ru"))...)
			pids := s.pids(t, 40)
			if len(pids) != 2 {
				t.Fatalf("answers from %v, want two workers", pids)
			}
			os.WriteFile(fails, nil, 0o644)
			killed := aWorkerPid(t, s)
			syscall.Kill(killed, syscall.SIGKILL)
			s.waitStderr(t, `"msg":"ruvoy: a new worker failed to start"`, 2)
			mustContain(t, "the log", s.stderr.String(), `boom in on_worker_boot (RuntimeError)`)
			mustContain(t, "the log", s.stderr.String(), `hooks.ru:`)
			for range 10 {
				r := s.get(t, "/pid")
				if r.status != 200 || r.body == strconv.Itoa(killed) {
					t.Fatalf("a request while the replacement fails: %d %s", r.status, r.body)
				}
			}
			os.Remove(fails)
			eventually(t, 90*time.Second, "the slot filled again", func() bool { return len(s.pids(t, 20)) == 2 })
			equal(t, "exit status", s.stop(), 0)
		})
	}

	for _, args := range [][]string{nil, {"-w", "2"}} {
		t.Run("on_worker_shutdown "+modeName(args), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "hooks")
			env := []string{"HOOKS_LOG=" + log, "HOOKS_RAISE=on_worker_shutdown"}
			s := startEnv(t, env, append(args, app("hooks.ru"))...)
			boots := len(of(hookEvents(t, log), "on_worker_boot"))
			equal(t, "exit status", s.stop(), 0)
			stderr := s.stderr.String()
			equal(t, "logged", strings.Count(stderr, `"msg":"Ruvoy.on_worker_shutdown's block raised"`), boots)
			mustContain(t, "the log", stderr, `"error":"boom in on_worker_shutdown"`)
			mustContain(t, "the log", stderr, `hooks.ru:`)
			equal(t, "the next hook ran", len(of(hookEvents(t, log), "on_worker_shutdown")), boots)
		})
	}
}

// modeName names a test's mode by its flags.
func modeName(args []string) string {
	if len(args) == 0 {
		return "one process"
	}
	return strings.Join(args, " ")
}

// aWorkerPid is the pid of one of the workers that answer.
func aWorkerPid(t *testing.T, s *server) int {
	t.Helper()
	pid, _ := strconv.Atoi(s.get(t, "/pid").body)
	return pid
}
