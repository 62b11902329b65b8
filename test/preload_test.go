package test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// children are the front end's child processes by pid, with their titles.
func children(t *testing.T, s *server) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, pid := range workerPids(t, s) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil {
			out[pid] = strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
		}
	}
	return out
}

// templatePid is the pid of the front end's template process (0: none).
func templatePid(t *testing.T, s *server) int {
	t.Helper()
	for pid, title := range children(t, s) {
		if strings.HasPrefix(title, "ruvoy: template") {
			return pid
		}
	}
	return 0
}

// smapsKiB is a field of a process's /proc smaps_rollup, in KiB.
func smapsKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatalf("no %s in %d's smaps_rollup", field, pid)
	return 0
}

// bootLog is the app's boot log (cluster.ru's CLUSTER_BOOT_LOG): a line
// "pid version" a boot.
func bootLog(t *testing.T, path string) []string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return strings.Fields(strings.ReplaceAll(string(b), " ", "/"))
}

// --preload boots the app once, in a template process, and forks the
// workers from it: two workers answer, titled as workers, children of the
// front end; the app loaded once, in the template; each worker shares the
// template's memory (pages written before the fork and not since); every
// kind of body crosses the process boundary byte for byte.
func TestClusterPreloadServes(t *testing.T) {
	boots := filepath.Join(t.TempDir(), "boots")
	s := startEnv(t, []string{"CLUSTER_BOOT_LOG=" + boots}, "-w", "2", "--preload", app("cluster.ru"))
	pids := s.pids(t, 100)
	if len(pids) != 2 {
		t.Fatalf("answers came from %d processes, want 2: %v", len(pids), pids)
	}
	tmpl := templatePid(t, s)
	if tmpl == 0 {
		t.Fatalf("no template among the front end's children: %v", children(t, s))
	}
	kids := children(t, s)
	for pid := range pids {
		n, _ := strconv.Atoi(pid)
		if !strings.HasPrefix(kids[n], "ruvoy: worker ") {
			t.Errorf("worker %d is not a child of the front end titled as a worker: %v", n, kids)
		}
		equal(t, "the pid that loaded the app, as a worker sees it", s.get(t, "/boot").body, strconv.Itoa(tmpl)+" none")
		// A forked worker shares what the template wrote before the fork
		// (Ruby's heap, the app's code): several MiB even for this app. A
		// worker started anew shares none of its own.
		if kib := smapsKiB(t, n, "Shared_Dirty"); kib < 4<<10 {
			t.Errorf("worker %d shares %d KiB of written memory with the template, want at least 4 MiB", n, kib)
		}
	}
	equal(t, "boots", strings.Join(bootLog(t, boots), " "), strconv.Itoa(tmpl)+"/none")

	bodiesCross(t, s, 10, 1<<20+17)
	equal(t, "exit status", s.stop(), 0)
}

// A dead worker is forked again from the same template, without a boot;
// once the template itself is gone, the next worker needs a new one, which
// boots the app again and says why; meanwhile the living worker serves.
func TestClusterPreloadWorkerAndTemplateDie(t *testing.T) {
	boots := filepath.Join(t.TempDir(), "boots")
	s := startEnv(t, []string{"CLUSTER_BOOT_LOG=" + boots}, "-w", "2", "--preload", app("cluster.ru"))
	before := s.pids(t, 20)
	crash := s.get(t, "/crash")
	equal(t, "the crashing request", crash.status, 502)
	eventually(t, 30*time.Second, "a new worker", func() bool {
		now := s.pids(t, 20)
		return len(now) == 2 && !sameKeys(now, before)
	})
	equal(t, "boots after a worker died", len(bootLog(t, boots)), 1)

	tmpl := templatePid(t, s)
	syscall.Kill(tmpl, syscall.SIGKILL)
	eventually(t, 10*time.Second, "the template gone", func() bool { return templatePid(t, s) == 0 })
	equal(t, "a request with the template gone", s.get(t, "/pid").status, 200)
	before = s.pids(t, 20)
	equal(t, "the crashing request", s.get(t, "/crash").status, 502)
	eventually(t, 60*time.Second, "a new worker from a new template", func() bool {
		now := s.pids(t, 20)
		return len(now) == 2 && !sameKeys(now, before)
	})
	s.waitStderr(t, `"msg":"ruvoy: the template process exited: booting the app in a new one"`, 1)
	if got := bootLog(t, boots); len(got) != 2 || got[1] != strconv.Itoa(templatePid(t, s))+"/none" {
		t.Fatalf("boots %v: want the second in the new template %d", got, templatePid(t, s))
	}
	equal(t, "exit status", s.stop(), 0)
}

// The stop of a --preload cluster is clean: each forked worker's VM
// ends, its at_exit hooks run, and the front end exits 0. (On Debian
// forky, glibc 2.43 never marks a forked worker's VM thread as exited:
// joining it hung, and every stop exited 4 without the hooks.) Run by
// test-forky (the Makefile's CORE_TESTS).
func TestClusterPreloadStop(t *testing.T) {
	exits := filepath.Join(t.TempDir(), "exits")
	s := startEnv(t, []string{"CLUSTER_EXIT_LOG=" + exits}, "-w", "2", "--preload", app("cluster.ru"))
	var workers []string
	eventually(t, 30*time.Second, "two forked workers", func() bool {
		workers = workers[:0]
		for pid, title := range children(t, s) {
			if strings.HasPrefix(title, "ruvoy: worker ") {
				workers = append(workers, strconv.Itoa(pid))
			}
		}
		return len(workers) == 2
	})
	equal(t, "a request", s.get(t, "/pid").status, 200)
	equal(t, "exit status", s.stop(), 0)
	mustContain(t, "the stop's line", s.stderr.String()+s.stdout.String(), "the app's at_exit hooks ran; exit status 0")
	b, _ := os.ReadFile(exits)
	ran := strings.Fields(string(b))
	for _, pid := range workers {
		if !slices.Contains(ran, pid) {
			t.Errorf("worker %s's at_exit hooks did not run (pids that ran them: %v)", pid, ran)
		}
	}
	if strings.Contains(s.stderr.String(), "the VM thread did not stop") {
		t.Errorf("a worker's VM thread did not stop:\n%s", s.stderr)
	}
}

// sameKeys says whether two sets of pids are the same.
func sameKeys(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// A rolling restart (SIGUSR2) boots the new code once, in a new template,
// forks the new workers from it, and ends the old template.
func TestClusterPreloadRestart(t *testing.T) {
	dir := t.TempDir()
	boots, version := filepath.Join(dir, "boots"), filepath.Join(dir, "version")
	os.WriteFile(version, []byte("v1"), 0o644)
	s := startEnv(t, []string{"CLUSTER_BOOT_LOG=" + boots, "CLUSTER_VERSION=" + version}, "-w", "2", "--preload", app("cluster.ru"))
	old := templatePid(t, s)
	equal(t, "the first code", s.get(t, "/boot").body, strconv.Itoa(old)+" v1")
	os.WriteFile(version, []byte("v2"), 0o644)
	s.cmd.Process.Signal(syscall.SIGUSR2)
	eventually(t, 60*time.Second, "the new code on every worker", func() bool {
		for range 20 {
			if !strings.HasSuffix(s.get(t, "/boot").body, " v2") {
				return false
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "the old template gone", func() bool {
		return templatePid(t, s) != old && syscall.Kill(old, 0) != nil
	})
	now := templatePid(t, s)
	equal(t, "boots", strings.Join(bootLog(t, boots), " "), strconv.Itoa(old)+"/v1 "+strconv.Itoa(now)+"/v2")
	equal(t, "the new code's loader", s.get(t, "/boot").body, strconv.Itoa(now)+" v2")
	equal(t, "exit status", s.stop(), 0)
}

// A process the app started and left behind outlives its worker: it comes
// to the front end (the workers' subreaper), which waits for it once it
// exits; no zombie stays.
func TestClusterPreloadReapsOrphans(t *testing.T) {
	s := start(t, "-w", "1", "--preload", app("cluster.ru"))
	child, _ := strconv.Atoi(s.get(t, "/orphan?s=1").body)
	if child <= 0 {
		t.Fatal("the app started no child")
	}
	equal(t, "the exiting request", s.get(t, "/exit").status, 502)
	eventually(t, 10*time.Second, "the orphan a child of the front end", func() bool {
		_, ok := children(t, s)[child]
		return ok || syscall.Kill(child, 0) != nil
	})
	eventually(t, 20*time.Second, "the orphan waited for", func() bool { return syscall.Kill(child, 0) != nil })
	equal(t, "a request after", s.get(t, "/pid").status, 200)
}

// The hold detector reports the backtrace of Ruby code that holds a forked
// worker's VM thread: its signal reaches the VM thread there as in a
// worker started anew (Go's handlers, installed after the fork, did not
// take it).
func TestClusterPreloadHoldReport(t *testing.T) {
	s := start(t, "-w", "1", "--preload", "--hold-warn", "100", app("cluster.ru"))
	equal(t, "the held request", s.get(t, "/stream-held").body, "first\nsecond\n")
	s.waitStderr(t, "the VM thread is held by one request", 1)
	mustContain(t, "the backtrace", s.stderr.String(), "cluster.ru")
}

// --worker-max-rss reads a forked worker's PSS (its RSS counts in full
// what it shares with the template) and replaces one that grew past it.
func TestClusterPreloadWorkerMaxRSS(t *testing.T) {
	s := start(t, "-w", "1", "--preload", "--worker-max-rss", "300", app("cluster.ru"))
	first := s.get(t, "/grow?mib=400").body
	eventually(t, 60*time.Second, "a new worker", func() bool {
		r := s.get(t, "/pid")
		return r.status == 200 && r.body != first
	})
	mustContain(t, "the log", s.stderr.String(), `"msg":"ruvoy: a worker grew past --worker-max-rss: replacing it"`)
	mustContain(t, "the measure", s.stderr.String(), `"pss_bytes":`)
}

// Ruvoy.offload's pools used while the app loads, in the template, have no
// threads in a forked worker: they start again there, and calls complete.
func TestClusterPreloadOffloadUsedAtBoot(t *testing.T) {
	buildBlockingExt(t)
	s := startEnv(t, []string{"OFFLOAD_AT_BOOT=1"}, "-w", "1", "--preload", app("offload.ru"))
	equal(t, "an offloaded call", s.get(t, "/offload?ms=10").body, "offloaded")
	equal(t, "a call through a pool of the app's", s.get(t, "/limited?ms=10").body, "limited")
}
