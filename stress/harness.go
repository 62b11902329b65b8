package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/testserver"
)

// Limits the server runs with: small enough to overload on purpose.
const (
	maxRequests = 256
	bodyBudget  = 64 << 20
)

type harness struct {
	cmd                *exec.Cmd
	main, control, adm string // base URLs
	mainAddr           string
	logPath            string
	counts             *counts
	lat                latencies
	bootRSS            int64 // at rest after start, before any traffic
}

func freePort() string {
	port, err := testserver.FreePort()
	if err != nil {
		panic(err)
	}
	return port
}

// startHarness writes a Caddy config with two servers (the one under
// stress, and a control listener with its own app and admission budget)
// and runs it with `ruvoy run`.
func startHarness(root, binary string) (*harness, error) {
	mainPort, controlPort, adminPort := freePort(), freePort(), freePort()
	rackup := filepath.Join(root, "stress", "app.ru")
	server := func(port string, limits map[string]any) map[string]any {
		handler := map[string]any{"handler": "ruvoy", "rackup": rackup, "environment": "production"}
		for k, v := range limits {
			handler[k] = v
		}
		return map[string]any{
			"listen":          []string{"127.0.0.1:" + port},
			"protocols":       []string{"h1", "h2c"},
			"automatic_https": map[string]any{"disable": true},
			"routes":          []any{map[string]any{"handle": []any{handler}}},
		}
	}
	cfg := map[string]any{
		"admin": map[string]any{"listen": "127.0.0.1:" + adminPort, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{
			"default": map[string]any{"level": "WARN"},
		}},
		"apps": map[string]any{"http": map[string]any{
			"grace_period": "5s",
			"servers": map[string]any{
				// Every load comes from one address: no bound per client.
				"main": server(mainPort, map[string]any{"max_requests": maxRequests, "max_requests_per_client": maxRequests,
					"max_inflight_body_bytes": bodyBudget}),
				"control": server(controlPort, nil),
			},
		}},
	}
	dir, err := os.MkdirTemp("", "ruvoy-stress")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "stress.json")
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, err
	}
	h := &harness{
		main:     "http://127.0.0.1:" + mainPort,
		mainAddr: "127.0.0.1:" + mainPort,
		control:  "http://127.0.0.1:" + controlPort,
		adm:      "http://127.0.0.1:" + adminPort,
		logPath:  filepath.Join(dir, "ruvoy.log"),
		counts:   &counts{},
	}
	logf, err := os.Create(h.logPath)
	if err != nil {
		return nil, err
	}
	h.cmd = exec.Command(binary, "run", "--config", cfgPath)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	if err := testserver.WaitListening("127.0.0.1:"+controlPort, 60*time.Second, nil); err != nil {
		h.stop()
		return nil, fmt.Errorf("ruvoy did not start (%v); its log: %s", err, h.logPath)
	}
	fmt.Printf("ruvoy pid %d, main %s (max_requests %d, body budget %d MiB), control %s; log %s\n",
		h.cmd.Process.Pid, h.main, maxRequests, bodyBudget>>20, h.control, h.logPath)
	h.bootRSS = h.restRSS()
	h.lat.findVMThread(h.cmd.Process.Pid)
	return h, nil
}

func (h *harness) stop() {
	if h.cmd.ProcessState != nil {
		return
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		h.cmd.Process.Kill()
		<-done
	}
}

// resources is what the harness watches for growth. Threads are split:
// Go's runtime keeps the OS threads it made for blocking calls (up to a
// high-water mark, reused, never a leak per request), so they get their
// own, looser bound; every other thread (the VM, Ruby threads, offload
// threads) must not grow.
type resources struct {
	fds, threads, goroutines int
	goThreads                int // named like the process: Go's runtime
	heapLiveSlots            int
	rss                      int64
}

func (h *harness) resources() resources {
	pid := h.cmd.Process.Pid
	var r resources
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		r.fds = len(ents)
	}
	r.threads, r.goThreads = threads(pid)
	r.rss = rss(pid)
	if res, err := http.Get(h.adm + "/debug/pprof/goroutine?debug=1"); err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Sscanf(string(b), "goroutine profile: total %d", &r.goroutines)
	}
	if res, err := http.Get(h.control + "/stats"); err == nil {
		var st struct {
			Slots int `json:"heap_live_slots"`
		}
		json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		r.heapLiveSlots = st.Slots
	}
	return r
}

// restRSS is the server's RSS at rest: after idleRest with no request, by
// when it has given back what the last burst left free (release.go).
func (h *harness) restRSS() int64 {
	time.Sleep(idleRest)
	return rss(h.cmd.Process.Pid)
}

const idleRest = 4 * time.Second

func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// metric reads one value from the admin API's /metrics.
func (h *harness) metric(name string) float64 {
	res, err := http.Get(h.adm + "/metrics")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
			return v
		}
	}
	return -1
}

// quiesce waits until no request holds a place in Ruby.
func (h *harness) quiesce() {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if h.metric("ruvoy_requests_in_flight") == 0 && h.metric("ruvoy_fibers_requests") == 0 {
			time.Sleep(500 * time.Millisecond) // let closed connections go
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("warning: requests still in flight 30 s after the phase ended")
}

// threads counts a process's threads and those of them named like the
// process itself (Go's; the VM and Ruby's threads carry other names).
func threads(pid int) (all, goRuntime int) {
	name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		all++
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, e.Name()))
		if string(comm) == string(name) {
			goRuntime++
		}
	}
	return
}
