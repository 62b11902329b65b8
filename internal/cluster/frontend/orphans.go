package frontend

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// With --preload this process is a child subreaper (template.go): the
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
