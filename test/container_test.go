package test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ruvoy as a container's first process (docs/deployment.md#containers).
// PID 1 of a pid namespace is special: the kernel delivers it only the
// signals it has a handler for, and every process orphaned in the
// namespace becomes its child, to be waited for by it or to stay a
// zombie. TestDeployContainerPid1 starts the binary as PID 1 of a new pid
// namespace with its own /proc (`unshare --pid --fork --mount-proc`: what
// a container runtime does, without an image); TestDeployContainerImage
// builds examples/rails/Dockerfile with podman and runs the image.

// A ruvoy as PID 1, in one process and as a cluster's front end: /up
// answers 200, logs go to stdout, the app's orphans are waited for while
// its own children stay its own, and SIGTERM (SIGINT, as from a
// terminal's Ctrl-C, for -w 2) drains and stops it with exit status 0
// (pid1Serves).
func TestDeployContainerPid1(t *testing.T) {
	needRoot(t, "a pid namespace of its own (unshare --pid), in which ruvoy is PID 1 as in a container")
	_, err := exec.LookPath("unshare")
	need(t, err == nil, "unshare (util-linux) on PATH")
	for _, mode := range []struct {
		name string
		args []string
		sig  syscall.Signal
	}{
		{"one process", nil, syscall.SIGTERM},
		{"-w 2", []string{"-w", "2"}, syscall.SIGINT},
		{"-w 2 --preload", []string{"-w", "2", "--preload"}, syscall.SIGTERM},
	} {
		t.Run(mode.name, func(t *testing.T) {
			port := freePort(t)
			args := append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", binary(t),
				"-p", port, "--health-path", "/up", "--drain-delay", "2"}, mode.args...)
			s := launchCmd(t, exec.Command("unshare", append(args, app("container.ru"))...), "", nil, "127.0.0.1:"+port)
			s.waitReady(t)
			pid1 := namespaceInit(t, s)
			// unshare ignores SIGTERM while it waits: a test that failed
			// stops PID 1 itself.
			t.Cleanup(func() { syscall.Kill(pid1, syscall.SIGTERM) })
			pid1Serves(t, s, pid1, pid1Checks{
				orphan: "/orphan?s=1", waitLater: "/wait-later?s=1.5", slow: "/slow?s=3",
				drain: 2 * time.Second, signal: sigName(mode.sig),
				stop: func(t testing.TB) { syscall.Kill(pid1, mode.sig) },
			})
		})
	}
}

// namespaceInit is the pid, as seen from here, of the process unshare
// started: PID 1 in its namespace.
func namespaceInit(t *testing.T, s *server) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, "unshare's child", func() bool {
		kids := processesUnder(s.cmd.Process.Pid)
		if len(kids) > 0 {
			pid = kids[0].pid
		}
		return pid > 0
	})
	equal(t, "its pid in its namespace", nsPid(pid), 1)
	return pid
}

// pid1Checks are the app's paths and the stop that pid1Serves uses.
type pid1Checks struct {
	orphan    string // answers the pid of a grandchild it left behind
	waitLater string // waits for a child of its own after it exited ("waited 0"); "": not checked
	slow      string // answers "slept", 3 s later
	drain     time.Duration
	signal    string             // as the stop's last line names it
	stop      func(t testing.TB) // sends the signal (and may wait for the exit)
	logs      []string           // more lines stdout must hold at the end
}

// pid1Serves checks a ruvoy that is PID 1 (pid1, as seen from here):
// /up answers 200 and the banner (with "pid":1) is on stdout; the app's
// child that starts a grandchild and exits leaves that grandchild to PID
// 1, which waits for it once it exits: no zombie stays in the namespace;
// the app's own child, waited for after it exited, is still the app's
// (a reaper that took it would make Process.wait fail). Then the stop,
// during a slow request and beside a client that follows /up (as a
// balancer in front does): /up answers 503 through the drain delay, the
// client sees no failure, the slow request finishes 200, the process
// exits 0 after the delay, saying so on stdout, and every process of the
// namespace is gone.
func pid1Serves(t *testing.T, s *server, pid1 int, c pid1Checks) {
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, 60*time.Second, "GET /up answering 200", func() bool { return statusAndBodyWith(fresh, s.url+"/up") == "200 ok\n" })
	// JSON lines on stdout when it is not a terminal, as a container's
	// log driver takes them.
	s.waitStdout(t, "the banner", `"pid":1,`)

	orphan, _ := strconv.Atoi(s.get(t, c.orphan).body)
	if orphan <= 0 {
		t.Fatal("the app started no grandchild")
	}
	var orphanHere int
	eventually(t, 10*time.Second, "the orphan a child of PID 1", func() bool {
		for _, p := range processesUnder(pid1) {
			if p.nspid == orphan && p.ppid == pid1 {
				orphanHere = p.pid
			}
		}
		return orphanHere > 0
	})
	eventually(t, 10*time.Second, "the orphan waited for once it exited (not left a zombie)", func() bool {
		return syscall.Kill(orphanHere, 0) == syscall.ESRCH
	})
	for _, p := range processesUnder(pid1) {
		if p.state == "Z" {
			t.Errorf("a zombie in the namespace: %+v", p)
		}
	}
	if c.waitLater != "" {
		equal(t, "the app's own child, waited for after it exited", s.get(t, c.waitLater).body, "waited 0")
	}

	namespace := processesUnder(pid1)
	slow := background(t, func(t testing.TB) string { return statusAndBodyWith(client, s.url+c.slow) })
	time.Sleep(500 * time.Millisecond) // in the app
	stopClient := make(chan struct{})
	defer close(stopClient)
	sent := background(t, func(t testing.TB) int { return followsHealth(t, s.url, stopClient) })
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	stopDone := background(t, func(t testing.TB) bool { c.stop(t); return true })
	eventually(t, 1500*time.Millisecond, "GET /up answering 503 once the stop began", func() bool {
		return strings.HasPrefix(statusAndBodyWith(fresh, s.url+"/up"), "503 ")
	})
	if n := <-sent; n == 0 {
		t.Error("the client sent no request")
	}
	equal(t, "the slow request under way at the stop", <-slow, "200 slept")
	equal(t, "exit status", s.wait(t, 40*time.Second), 0)
	<-stopDone
	if d := time.Since(stopped); d < c.drain {
		t.Errorf("stopped %v after %s, within the drain delay of %v", d.Round(time.Millisecond), c.signal, c.drain)
	}
	for _, line := range append([]string{"ruvoy: stopped (" + c.signal + "): ", "exit status 0"}, c.logs...) {
		mustContain(t, "stdout", s.stdout.String(), line)
	}
	eventually(t, 5*time.Second, "every process of the namespace gone", func() bool {
		for _, p := range append(namespace, nsProc{pid: pid1}) {
			if syscall.Kill(p.pid, 0) != syscall.ESRCH {
				return false
			}
		}
		return true
	})
}

// followsHealth is a client that follows the health check, as a balancer
// in front does (kamal-proxy): it sends GET / every 20 ms on kept-alive
// connections and asks /up every 100 ms; from the first answer that is not
// 200 on, it sends nothing more. Every request it sent must succeed. It
// returns how many it sent.
func followsHealth(t testing.TB, url string, stop <-chan struct{}) int {
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	sent := 0
	next := time.Now()
	for {
		select {
		case <-stop:
			return sent
		default:
		}
		if time.Now().After(next) {
			if got := statusAndBodyWith(probe, url+"/up"); got != "200 ok\n" {
				return sent
			}
			next = time.Now().Add(100 * time.Millisecond)
		}
		got := statusAndBodyWith(client, url+"/")
		if !strings.HasPrefix(got, "200 ") {
			t.Errorf("request %d of a client that follows /up: %.200s", sent+1, got)
			return sent
		}
		sent++
		time.Sleep(20 * time.Millisecond)
	}
}

func sigName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig]
}

// examples/rails/Dockerfile (the form of Rails 8's generated Dockerfile,
// ruvoy in the place of Thruster and Puma, from the platform gem `make
// gem` builds) built with podman and run: through the entrypoint (which
// prepares the database) and the gem's launcher, both of which exec,
// ruvoy is the container's PID 1; Rails answers and logs to stdout; then
// pid1Serves's checks, stopped with `podman stop` (SIGTERM, as `docker
// stop` and Kamal send), which must end with the container's exit status
// 0. In one process, and with WEB_CONCURRENCY=2.
//
// No image registry answers this machine: the base, in the place of
// docker.io/library/ruby:VERSION-slim, is a Debian root made with
// debootstrap (build/container-base.sh) and imported under that name, in
// an image store of the test's own. The sandbox this runs in here grants
// no CAP_SYS_RESOURCE and mounts cgroups v1 and v2 side by side: podman
// runs its containers with runc (crun refuses those cgroups), with
// rlimits within the current ones (its defaults are higher), and on the
// host's network (no port mapping: netavark's bridge calls iptables,
// which setup-test does not install).
func TestDeployContainerImage(t *testing.T) {
	needRoot(t, "podman as root (image layers are mounts) and debootstrap")
	for _, p := range []string{"podman", "runc", "debootstrap"} {
		_, err := exec.LookPath(p)
		if err != nil {
			_, err = exec.LookPath("/usr/sbin/" + p)
		}
		need(t, err == nil, p+" on PATH (make setup-test installs it)")
	}
	gem := builtGem(t)
	base, err := exec.Command("../build/container-base.sh").Output()
	if err != nil {
		t.Fatalf("build/container-base.sh: %v", err)
	}
	pm := newPodman(t)
	ruby := rubyVersion(t)
	// What docker.io/library/ruby's images set: gems go to /usr/local/bundle.
	imp := pm.args("import", "--change", "ENV LANG=C.UTF-8", "--change", "ENV GEM_HOME=/usr/local/bundle",
		"--change", "ENV BUNDLE_SILENCE_ROOT_WARNING=1", "--change", "ENV BUNDLE_APP_CONFIG=/usr/local/bundle",
		"--change", "ENV PATH=/usr/local/bundle/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--change", `CMD ["irb"]`, "-", "docker.io/library/ruby:"+ruby+"-slim")
	pm.run(t, "sh", append([]string{"-c", `root=$1; shift; tar -C "$root" -c . | podman "$@"`, "sh",
		strings.TrimSpace(string(base))}, imp...)...)

	// The app as a fresh clone has it, and the gem in its vendor/.
	ctx := t.TempDir()
	pm.run(t, "sh", "-c", `cd .. && git ls-files -co --exclude-standard -z examples/rails | xargs -0 tar -cf - |
		tar -xf - -C "$1" --strip-components=2`, "sh", ctx)
	os.MkdirAll(filepath.Join(ctx, "vendor"), 0o755)
	pm.run(t, "cp", gem, filepath.Join(ctx, "vendor"))
	began := time.Now()
	pm.podman(t, append([]string{"build", "--pull=never", "--network", "none", "--build-arg", "RUBY_VERSION=" + ruby,
		"-t", "localhost/ruvoy-blog"}, append(pm.limits, ctx)...)...)
	t.Logf("the image built in %v", time.Since(began).Round(time.Second))

	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"one process", nil},
		{"WEB_CONCURRENCY=2", []string{"-e", "WEB_CONCURRENCY=2"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			port := freePort(t)
			name := "ruvoy-blog-" + port
			args := append([]string{"run", "--name", name, "--network", "host", "-e", "PORT=" + port,
				"-e", "SECRET_KEY_BASE=" + strings.Repeat("5e", 64), "-e", "RUVOY_TEST_PROBES=1"}, pm.limits...)
			args = append(append(args, mode.env...), "localhost/ruvoy-blog")
			s := launchCmd(t, exec.Command("podman", pm.args(args...)...), "", nil, "127.0.0.1:"+port)
			t.Cleanup(func() { pm.cmd("rm", "--force", name).Run() })
			s.waitReady(t)
			pid1, _ := strconv.Atoi(pm.podman(t, "inspect", "--format", "{{.State.Pid}}", name))
			equal(t, "ruvoy's pid in the container", nsPid(pid1), 1)
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid1))
			if filepath.Base(exe) != "ruvoy" || !strings.Contains(exe, "/usr/local/bundle/gems/ruvoy-") {
				t.Errorf("PID 1 runs %s, not the gem's ruvoy", exe)
			}
			equal(t, "the articles (Rails, its database prepared by the entrypoint)", s.get(t, "/articles").status, 200)
			pid1Serves(t, s, pid1, pid1Checks{
				orphan: "/probes/orphan?s=1", slow: "/probes/sleep?s=3", drain: 5 * time.Second, signal: "SIGTERM",
				stop: func(t testing.TB) { pm.podman(t, "stop", "--time", "40", name) },
				// Rails' request log, on stdout.
				logs: []string{`Started GET "/probes/sleep?s=3"`, "Completed 200 OK"},
			})
			equal(t, "the container's exit status", pm.podman(t, "inspect", "--format", "{{.State.ExitCode}}", name), "0")
		})
	}
}

// The Dockerfile and entrypoint in docs/deployment.md are the ones
// TestDeployContainerImage builds where ruvoy is concerned: the lines
// marked "# ruvoy:" (to the next blank line), the entrypoint, the user
// and the port are examples/rails's, word for word, and
// bin/docker-entrypoint is the same file.
func TestDeployContainerDocsDockerfile(t *testing.T) {
	example, err := os.ReadFile("../examples/rails/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	entrypoint, err := os.ReadFile("../examples/rails/bin/docker-entrypoint")
	if err != nil {
		t.Fatal(err)
	}
	var dockerfile, script string
	for _, b := range docBlocks(t) {
		switch {
		case b.file != "../docs/deployment.md":
		case b.lang == "dockerfile" && strings.Contains(b.text, `CMD ["ruvoy"`):
			dockerfile = b.text
		case strings.HasPrefix(b.text, "#!/bin/bash -e\n"):
			script = b.text
		}
	}
	if dockerfile == "" || script == "" {
		t.Fatal("docs/deployment.md shows no Dockerfile with ruvoy's CMD, or no bin/docker-entrypoint")
	}
	equal(t, "docs/deployment.md's bin/docker-entrypoint", script, string(entrypoint))
	n := 0
	marked := false
	for _, line := range strings.Split(dockerfile, "\n") {
		marked = marked && line != "" || strings.HasPrefix(line, "# ruvoy:")
		if !marked && !strings.HasPrefix(line, "ENTRYPOINT ") && !strings.HasPrefix(line, "USER ") {
			continue
		}
		n++
		if !strings.Contains(string(example), line+"\n") {
			t.Errorf("docs/deployment.md's Dockerfile has %q, examples/rails/Dockerfile does not", line)
		}
	}
	if n < 8 {
		t.Errorf("only %d lines of docs/deployment.md's Dockerfile are ruvoy's", n)
	}
}

// podman runs podman with an image store of a test's own, and the
// settings this machine needs (TestDeployContainerImage).
type podman struct {
	flags  []string
	limits []string // for each container: --ulimit within this process's own
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	// Short: the runtime's sockets live under it (108 bytes at most).
	dir, err := os.MkdirTemp("", "rvp")
	if err != nil {
		t.Fatal(err)
	}
	p := &podman{flags: []string{"--root", dir + "/root", "--runroot", dir + "/run", "--tmpdir", dir + "/tmp",
		"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--log-level", "error"}}
	var nofile syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	n := min(nofile.Max, 65536)
	p.limits = []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", n, n), "--ulimit", "nproc=4096:4096"}
	t.Cleanup(func() {
		// Nothing of the store may stay mounted when it is removed.
		p.cmd("rm", "--all", "--force").Run()
		p.cmd("rmi", "--all", "--force").Run()
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing podman's store: %v", err)
		}
	})
	return p
}

func (p *podman) args(a ...string) []string { return append(append([]string{}, p.flags...), a...) }

func (p *podman) cmd(a ...string) *exec.Cmd { return exec.Command("podman", p.args(a...)...) }

// podman runs a podman command and returns its output, trimmed.
func (p *podman) podman(t testing.TB, a ...string) string {
	t.Helper()
	return p.run(t, "podman", p.args(a...)...)
}

// run runs a command and returns its output, trimmed.
func (p *podman) run(t testing.TB, name string, a ...string) string {
	t.Helper()
	out, err := exec.Command(name, a...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(a, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// nsProc is a process as seen from here, with its pid in its own
// namespace.
type nsProc struct {
	pid, ppid, nspid int
	state, title     string
}

// processesUnder lists the processes below pid (children first, then
// theirs), as seen from here.
func processesUnder(pid int) []nsProc {
	var out []nsProc
	for _, child := range childPids(pid) {
		title, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		out = append(out, nsProc{pid: child, ppid: pid, nspid: nsPid(child), state: procState(child),
			title: strings.TrimSpace(strings.ReplaceAll(string(title), "\x00", " "))})
		out = append(out, processesUnder(child)...)
	}
	return out
}

// nsPid is pid's number in its innermost pid namespace (NSpid's last
// field), or 0.
func nsPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}
