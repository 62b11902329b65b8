package frontend

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The reaper takes the orphans that come to this process (here as a
// subreaper; as PID 1 the same way) once they exit, and leaves alone a
// child of another thread (the app's, forked on the VM thread), which its
// own waiter collects.
func TestReapZombiesTakesOrphansOnly(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	// The app's child, as the VM thread forks them.
	child := startOffMainThread(t)

	// An orphan: a child's child, left behind when the child exits.
	out, err := exec.Command("sh", "-c", "sleep 0.2 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if orphan <= 0 {
		t.Fatalf("no orphan: %q", out)
	}
	wait(t, "the orphan and the child exited", func() bool { return zombie(orphan) && zombie(child) })
	if main := mainThreadChildren(); !main[orphan] || main[child] {
		t.Fatalf("the main thread's children %v: the orphan %d should be among them, the child %d not", main, orphan, child)
	}

	reapZombies()
	if err := syscall.Kill(orphan, 0); err != syscall.ESRCH {
		t.Errorf("the orphan %d after reapZombies: %v, want it gone (ESRCH)", orphan, err)
	}
	if !zombie(child) {
		t.Fatalf("the child %d of another thread was taken from its waiter", child)
	}
	var ws syscall.WaitStatus
	if got, err := syscall.Wait4(child, &ws, 0, nil); got != child || err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("waiting for the child: %d %v %v", got, err, ws)
	}
}

// startOffMainThread starts /bin/true from a thread other than the main
// one, as the VM thread starts the app's children.
func startOffMainThread(t *testing.T) int {
	t.Helper()
	held := make(chan struct{})
	defer close(held)
	for range 8 {
		got := make(chan int, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if syscall.Gettid() == os.Getpid() {
				got <- 0
				<-held // keeps the main thread, so that the next goroutine has another
				return
			}
			pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
			if err != nil {
				pid = -1
			}
			got <- pid
		}()
		if pid := <-got; pid != 0 {
			if pid < 0 {
				t.Fatal("starting a child failed")
			}
			return pid
		}
	}
	t.Fatal("no goroutine ran off the main thread")
	return 0
}

func mainThreadChildren() map[int]bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/children", os.Getpid()))
	m := map[int]bool{}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		m[pid] = true
	}
	return m
}

func wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}
