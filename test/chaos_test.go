package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// metricNumber is a metric's value as a number.
func metricNumber(t *testing.T, admin, name string) float64 {
	t.Helper()
	var v float64
	fmt.Sscan(metricValue(t, admin, name), &v)
	return v
}

// workerExit is a worker's "a worker exited" log entry.
type workerExit struct {
	Msg      string `json:"msg"`
	Pid      int    `json:"pid"`
	Cause    string `json:"cause"`
	Failed   int    `json:"requests_failed"`
	Status   int    `json:"status"`
	Hijacked int    `json:"hijacked_connections_lost"`
}

// workerExits reads the server's "a worker exited" entries.
func workerExits(s *server) []workerExit {
	var out []workerExit
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if !strings.Contains(line, `"msg":"ruvoy: a worker exited"`) {
			continue
		}
		var e workerExit
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// For a minute under load, workers are killed (SIGKILL), stopped for a
// moment (SIGSTOP, SIGCONT), stopped for good, and made to exit (exit!),
// at random, one at a time while the other serves. The front end stays up
// and serves throughout: no client meets a transport error; the requests
// a dead worker ran get 502 (or their body cut) and those of a stopped
// one 504 once --worker-timeout passed, each counted in the log line that
// says why; every other request gets 200; every slot serves again after;
// and the front end ends with the descriptors and goroutines it began with.
func TestClusterChaos(t *testing.T) {
	length := time.Minute
	if testing.Short() {
		length = 10 * time.Second
	}
	clusterChaos(t, length)
}

// The same with --preload, where the template is killed as well now and
// then: a worker that dies meanwhile is forked from a new one.
func TestClusterChaosPreload(t *testing.T) {
	length := 30 * time.Second
	if testing.Short() {
		length = 10 * time.Second
	}
	clusterChaos(t, length, "--preload")
}

func clusterChaos(t *testing.T, length time.Duration, args ...string) {
	preload := len(args) > 0
	adminPort := freePort(t)
	s := start(t, append([]string{"-w", "2", "--worker-timeout", "2", "--admin-port", adminPort, app("cluster.ru")}, args...)...)
	admin := "http://127.0.0.1:" + adminPort
	s.pids(t, 20)
	// The first scrape opens the admin gate's connection to Caddy's
	// admin socket, which it keeps: counted from the start.
	goroutines := metricNumber(t, admin, "go_goroutines")
	client.CloseIdleConnections()
	fds := openFDs(t, s)

	var statuses sync.Map // status -> *atomic.Int64
	count := func(status int) {
		c, _ := statuses.LoadOrStore(status, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
	var serving sync.Map            // pid -> when it last answered /pid
	var transport, cut atomic.Int64 // no answer; an answer cut short
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(path string) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := client.Get(s.url + path)
			if err != nil {
				transport.Add(1)
				lastErr.Store(err.Error())
				continue
			}
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				cut.Add(1) // its worker died while it streamed
				continue
			}
			if r.StatusCode == 200 && len(b) == 0 {
				t.Errorf("GET %s: 200 with an empty body", path)
			}
			if r.StatusCode == 200 && path == "/pid" {
				serving.Store(string(b), time.Now())
			}
			count(r.StatusCode)
		}
	}
	for i := range 8 {
		wg.Add(1)
		go load([]string{"/pid", "/sleep?s=0.05", "/sleep?s=0.3", "/stream"}[i%4])
	}

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	// The blows in turn, in an order shuffled once, and on past length
	// until each kind has landed: a run cannot pass without chaos.
	choices := []string{"kill", "pause", "stop", "exit"}
	if preload {
		choices = append(choices, "template")
	}
	rng.Shuffle(len(choices), func(i, j int) { choices[i], choices[j] = choices[j], choices[i] })
	actions := map[string]int{}
	hit := map[string][]int{} // the pids each kind of blow landed on
	landed := 0
	began := time.Now()
	for end := began.Add(length); time.Now().Before(end) || len(actions) < len(choices); {
		if time.Since(began) > length+2*time.Minute {
			t.Fatalf("after %v only these blows landed: %v (every kind of %v must)", time.Since(began).Round(time.Second), actions, choices)
		}
		time.Sleep(time.Duration(1000+rng.Intn(1000)) * time.Millisecond)
		// One worker at a time is hit, while the other serves: both down
		// at once would leave requests nobody can answer.
		var pids []int
		serving.Range(func(k, v any) bool {
			if time.Since(v.(time.Time)) < 500*time.Millisecond {
				var pid int
				fmt.Sscan(k.(string), &pid)
				pids = append(pids, pid)
			}
			return true
		})
		if len(pids) < 2 {
			continue
		}
		pid := pids[rng.Intn(len(pids))]
		action := choices[landed%len(choices)]
		switch action {
		case "template": // the next worker to die is forked from a new one
			tmpl := templatePid(t, s)
			if tmpl == 0 {
				continue
			}
			pid = tmpl
			syscall.Kill(tmpl, syscall.SIGKILL)
		case "kill":
			syscall.Kill(pid, syscall.SIGKILL)
		case "pause": // shorter than --worker-timeout: it just answers late
			syscall.Kill(pid, syscall.SIGSTOP)
			waitStopped(t, pid)
			time.Sleep(500 * time.Millisecond)
			syscall.Kill(pid, syscall.SIGCONT)
		case "stop": // for good: the front end kills it after --worker-timeout
			syscall.Kill(pid, syscall.SIGSTOP)
			waitStopped(t, pid)
		case "exit":
			if r, err := client.Get(s.url + "/exit"); err == nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				count(r.StatusCode)
			} else {
				transport.Add(1)
				lastErr.Store(err.Error())
			}
		}
		actions[action]++
		hit[action] = append(hit[action], pid)
		landed++
	}
	close(stop)
	wg.Wait()
	t.Logf("actions: %v", actions)

	// Every slot serves again, from a new worker where the old one died.
	eventually(t, 60*time.Second, "two workers serving", func() bool { return len(s.pids(t, 20)) == 2 })
	got := map[int]int64{}
	statuses.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("answers by status: %v; cut short: %d; transport errors: %d", got, cut.Load(), transport.Load())
	if n := transport.Load(); n != 0 {
		t.Errorf("%d requests met a transport error (last: %v): the front end must answer every one", n, lastErr.Load())
	}
	for status := range got {
		if status != 200 && status != 502 && status != 504 {
			t.Errorf("%d answers with status %d", got[status], status)
		}
	}
	if got[200] == 0 {
		t.Fatalf("no request succeeded")
	}
	// The 502s, 504s and cut answers are the requests the log says failed
	// with their worker.
	failed := map[int]int64{}
	for _, e := range workerExits(s) {
		failed[e.Status] += int64(e.Failed)
	}
	equal(t, "failed answers against the log's failed requests", got[502]+got[504]+cut.Load(), failed[502]+failed[504])
	if got[502] > failed[502] || got[504] > failed[504] {
		t.Errorf("answers %v, while the log has %v failed by status", got, failed)
	}
	// Each blow shows in the log: a worker killed by its signal, one
	// stopped for good killed for its silence, one made to exit with
	// cluster.ru's status 7.
	exited := map[int]string{}
	sevens := 0
	for _, e := range workerExits(s) {
		exited[e.Pid] = e.Cause
		if e.Cause == "exit status 7" {
			sevens++
		}
	}
	for _, pid := range hit["kill"] {
		if exited[pid] != "signal: killed" {
			t.Errorf("worker %d, killed: its exit in the log says %q", pid, exited[pid])
		}
	}
	for _, pid := range hit["stop"] {
		if exited[pid] != "killed: it stopped reporting" {
			t.Errorf("worker %d, stopped for good: its exit in the log says %q", pid, exited[pid])
		}
	}
	if sevens < actions["exit"] {
		t.Errorf("%d workers made to exit, %d exits with status 7 in the log", actions["exit"], sevens)
	}

	// Every worker stopped for good is found out. A worker that is only
	// slow to report can be too: under -race on a busy 2-core machine one
	// paused for 0.5 s went 2.9 s without a report (--worker-timeout 2),
	// and its requests counted as failed above like the others'.
	if n := strings.Count(s.stderr.String(), `"msg":"ruvoy: a worker stopped reporting`); n < actions["stop"] {
		t.Errorf("%d workers were stopped for good, %d found out", actions["stop"], n)
	} else if n > actions["stop"] {
		t.Logf("%d workers were stopped for good, %d killed as silent", actions["stop"], n)
	}

	// Nothing leaks in the front end: descriptors and goroutines come back.
	client.CloseIdleConnections()
	eventually(t, 30*time.Second, "the front end's descriptors back", func() bool { return openFDs(t, s) <= fds+2 })
	eventually(t, 30*time.Second, "the front end's goroutines back", func() bool {
		return metricNumber(t, admin, "go_goroutines") <= goroutines+5
	})
}

// A worker's death closes the connections its app had taken over: the
// log line counts them, and the clients see their connection end.
func TestClusterWorkerDiesWithHijacked(t *testing.T) {
	s := start(t, "-w", "2", app("cluster.ru"))
	byPid := map[string][]net.Conn{}
	for range 6 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "the hijack's status", res.StatusCode, 200)
		pid, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		byPid[strings.TrimSpace(pid)] = append(byPid[strings.TrimSpace(pid)], &bufferedConn{c, br})
	}
	var victim string
	for pid := range byPid {
		victim = pid
	}
	held := byPid[victim]
	time.Sleep(1500 * time.Millisecond) // its figures (every 500 ms) count them
	var pid int
	fmt.Sscan(victim, &pid)
	syscall.Kill(pid, syscall.SIGKILL)
	s.waitStderr(t, `"msg":"ruvoy: a worker exited"`, 1)
	exits := workerExits(s)
	equal(t, "hijacked connections lost, in the log", exits[0].Hijacked, len(held))
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("a connection the dead worker held is still open")
		}
	}
	// The others' connections are untouched.
	for pid, conns := range byPid {
		if pid == victim {
			continue
		}
		for _, c := range conns {
			fmt.Fprintf(c, "ping!")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, 5)
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping!" {
				t.Errorf("a connection another worker held: %q, %v", b, err)
			}
		}
	}
}

// waitStopped waits until process pid is stopped (state T): the signal
// has landed.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("process %d stopped", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		rest := b[bytes.LastIndexByte(b, ')')+1:]
		return len(rest) > 1 && rest[1] == 'T'
	})
}

// bufferedConn reads through the reader that read the response head.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
