package frontend

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The front end's children: the workers and templates the pool starts or
// has forked, each waited for by a waiter of its own (registered here), and
// the orphans. With --preload this process is a child subreaper (template.go): the
// processes a worker's app leaves behind when the worker exits come to it,
// not to init, and each that exits stays a zombie until it is waited for.
// As PID 1 (a container's first process) it is init, and every orphan in
// its pid namespace comes to it the same way (ReapAsInit). The front end
// waits for those it does not know; the ones it started or forked
// (children) each have a waiter of their own.
var (
	childrenMu sync.Mutex // held from a child's start until it is registered
	children   = map[int]bool{}
	reapOnce   sync.Once
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

// started registers a child the pool waits for itself; the caller holds
// childrenMu from before the child started.
func started(pid int) { children[pid] = true }

// waited forgets a child once its waiter has it.
func waited(pid int) {
	childrenMu.Lock()
	delete(children, pid)
	childrenMu.Unlock()
}

// ReapAsInit waits for orphans when this process is its pid namespace's
// init (PID 1: a container's first process, `unshare --pid --fork`): the
// kernel gives init every process whose parent exits, and nobody else
// waits for them. Elsewhere init or a subreaper above does.
func ReapAsInit() {
	if os.Getpid() == 1 {
		reapOrphans(time.Second)
	}
}

// reapOrphans starts waiting for orphans, once: at each SIGCHLD and every
// period (a signal may cover several exits, and with a VM in this process
// Ruby's handler takes SIGCHLD from Go: rv_signals.c).
func reapOrphans(period time.Duration) {
	reapOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGCHLD)
		go func() {
			t := time.NewTicker(period)
			for {
				select {
				case <-ch:
				case <-t.C:
				}
				reapZombies()
			}
		}()
	})
}

// reapZombies waits for the orphans that have exited. The kernel hands an
// orphan to the main thread of the process that takes it up (the first
// live thread of the group), while a child belongs to the thread that
// forked it: the app's own children are the VM thread's (or its Ruby
// threads'), and stay the app's to wait for (Process.wait, system). The
// main thread runs no Ruby; the children it started are registered, and
// their waiters have them.
func reapZombies() {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/children", os.Getpid()))
	for _, field := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(field)
		if err != nil || children[pid] || !zombie(pid) {
			continue
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
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
