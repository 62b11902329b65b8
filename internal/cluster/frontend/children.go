package frontend

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The front end's children: the workers and templates the pool starts or
// has forked, each waited for by a waiter of its own (registered here), and
// the orphans. With --preload this process is a child subreaper (template.go): the
// processes a worker's app leaves behind when the worker exits come to it,
// not to init, and each that exits stays a zombie until it is waited for.
// The front end waits for those it does not know; the ones it started or
// forked (children) each have a waiter of their own.
var (
	childrenMu sync.Mutex // held from a child's start until it is registered
	children   = map[int]bool{}
	reapOnce   sync.Once
	// reapOff: this process runs a VM of its own, whose app waits for its
	// own children (Process.wait): none may be taken from it.
	reapOff atomic.Bool
)

// startSelf starts this binary again as title, with env added and files
// as its descriptors from 3 on, its output this process's; registered, as
// the pool waits for it itself.
func startSelf(title, env string, files ...*os.File) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{title}
	cmd.Env = append(os.Environ(), env)
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	childrenMu.Lock()
	defer childrenMu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	started(cmd.Process.Pid)
	return cmd, nil
}

// LocalVM says this process runs an app in its own VM: orphans are no
// longer waited for (docs/limits.md).
func LocalVM() { reapOff.Store(true) }

// started registers a child the pool waits for itself; the caller holds
// childrenMu from before the child started.
func started(pid int) { children[pid] = true }

// waited forgets a child once its waiter has it.
func waited(pid int) {
	childrenMu.Lock()
	delete(children, pid)
	childrenMu.Unlock()
}

// reapOrphans starts waiting for orphans, once: at each SIGCHLD and every
// few seconds (a signal may cover several exits).
func reapOrphans() {
	reapOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGCHLD)
		go func() {
			t := time.NewTicker(5 * time.Second)
			for {
				select {
				case <-ch:
				case <-t.C:
				}
				if !reapOff.Load() {
					reapZombies()
				}
			}
		}()
	})
}

// reapZombies waits for the exited children this process did not start.
func reapZombies() {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(field)
			if err != nil || children[pid] || !zombie(pid) {
				continue
			}
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// zombie says whether pid has exited and waits to be waited for.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')') // the name may hold spaces and parentheses
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
