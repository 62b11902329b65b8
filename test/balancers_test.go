package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// docs/deployment.md's HAProxy and nginx configs, as written there, in
// front of three hosts run as the page says, on loopback: each host is
// restarted in turn under load (SIGTERM, then started again on its port)
// and no request the page says survives is lost.

// docsBlock is the text of the first block of docs/deployment.md in lang
// whose text starts with prefix.
func docsBlock(t *testing.T, lang, prefix string) string {
	t.Helper()
	for _, b := range docBlocks(t) {
		if b.file == "../docs/deployment.md" && b.lang == lang && strings.HasPrefix(b.text, prefix) {
			return b.text
		}
	}
	t.Fatalf("docs/deployment.md has no %q block starting %q", lang, prefix)
	return ""
}

// docsHosts are the hosts' addresses in the docs' balancer configs.
var docsHosts = []string{"198.51.100.11:8080", "198.51.100.12:8080", "198.51.100.13:8080"}

// balancedHost is a host of the page's recipe on loopback.
type balancedHost struct {
	s    *server
	port string
	args []string
}

// startBalancedHosts starts three hosts with the page's command line for a
// host (its address and port made loopback's, the balancer trusted as
// 127.0.0.1), serving cluster.ru, each until its health path answers 200.
func startBalancedHosts(t *testing.T) []*balancedHost {
	t.Helper()
	line := strings.TrimSpace(docsBlock(t, "", "ruvoy -a 198.51.100.11 "))
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[1] != "-a" || fields[3] != "-p" || fields[len(fields)-1] != "config.ru" {
		t.Fatalf("the page's host command is not ruvoy -a ADDR -p PORT ... config.ru: %q", line)
	}
	flags := strings.ReplaceAll(strings.Join(fields[5:len(fields)-1], " "), "198.51.100.1/32", "127.0.0.1/32")
	var hosts []*balancedHost
	for range docsHosts {
		h := &balancedHost{port: freePort(t)}
		h.args = append(append([]string{"-a", "127.0.0.1", "-p", h.port}, strings.Fields(flags)...), app("cluster.ru"))
		h.start(t)
		hosts = append(hosts, h)
	}
	return hosts
}

func (h *balancedHost) start(t *testing.T) {
	t.Helper()
	h.s = launch(t, h.port, h.args...)
	h.s.waitReady(t)
	eventually(t, 60*time.Second, "the host's health path answering 200", func() bool {
		return statusAndBody(h.s.url+"/up") == "200 ok\n"
	})
}

// balancerLoad sends requests through url by 6 clients until stop is
// closed: GETs of /pid, and with posts POSTs of a body the app hashes.
// It counts the answers by host and the failures.
type balancerLoad struct {
	mu       sync.Mutex
	byHost   map[string]int
	failures []string
	total    atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startBalancerLoad(url string, posts bool) *balancerLoad {
	l := &balancerLoad{byHost: map[string]int{}, stop: make(chan struct{})}
	body := bytes.Repeat([]byte("ruvoy behind a balancer\n"), 2000)
	sum := sha256.Sum256(body)
	wantUpload := fmt.Sprintf("200 %d %s", len(body), hex.EncodeToString(sum[:]))
	c := &http.Client{Timeout: 30 * time.Second}
	for i := range 6 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				failure, pid := "", ""
				if posts && i%2 == 1 {
					if got := postAndStatus(c, url+"/upload", body); got != wantUpload {
						failure = "POST /upload: " + got
					}
				} else {
					got := statusAndBodyWith(c, url+"/pid")
					pid = strings.TrimPrefix(got, "200 ")
					if _, err := strconv.Atoi(pid); err != nil || !strings.HasPrefix(got, "200 ") {
						failure, pid = "GET /pid: "+got, ""
					}
				}
				l.total.Add(1)
				l.mu.Lock()
				if failure != "" {
					l.failures = append(l.failures, failure)
				} else if pid != "" {
					l.byHost[pid]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// end stops the load and returns its figures.
func (l *balancerLoad) end() (total int64, byHost map[string]int, failures []string) {
	close(l.stop)
	l.wg.Wait()
	return l.total.Load(), l.byHost, l.failures
}

func postAndStatus(c *http.Client, url string, body []byte) string {
	res, err := c.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return fmt.Sprintf("%d %s", res.StatusCode, b)
}

// rollingRestart restarts each host in turn while load runs through the
// balancer at url: SIGTERM, its exit (0), then a new process on its port,
// and a second before the next. The load goes on for settle after the
// last (time for the balancer to take it back): every new process must
// have served.
func rollingRestart(t *testing.T, hosts []*balancedHost, url string, posts bool, settle time.Duration) {
	t.Helper()
	load := startBalancerLoad(url, posts)
	time.Sleep(time.Second)
	for _, h := range hosts {
		old := h.s
		old.cmd.Process.Signal(syscall.SIGTERM)
		equal(t, "a host's exit status", old.wait(t, 30*time.Second), 0)
		h.start(t)
		time.Sleep(time.Second)
	}
	time.Sleep(settle)
	total, byHost, failures := load.end()
	t.Logf("%d requests through the balancer while 3 hosts restarted in turn; GETs by host pid: %v", total, byHost)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed; the first: %s", len(failures), total, failures[0])
	}
	for _, h := range hosts {
		if byHost[strconv.Itoa(h.s.cmd.Process.Pid)] == 0 {
			t.Errorf("the restarted host on %s served no request through the balancer", h.port)
		}
	}
}

// The HAProxy backend of docs/deployment.md (its active health check on
// /up every 250 ms, one failure out, two passes back; retries on a
// connection failure or an empty answer), behind a frontend on loopback:
// no GET and no POST is lost while each host in turn drains and restarts.
func TestDeployBehindHAProxy(t *testing.T) {
	haproxy := lookBalancer(t, "haproxy")
	hosts := startBalancedHosts(t)
	backend := docsBlock(t, "haproxy", "backend app")
	for i, h := range hosts {
		backend = strings.Replace(backend, docsHosts[i], "127.0.0.1:"+h.port, 1)
	}
	port := freePort(t)
	cfg := haproxyConfig(t, haproxy, backend, port)
	lb := launchCmd(t, exec.Command(haproxy, "-db", "-f", cfg), "", nil, "127.0.0.1:"+port)
	lb.waitReady(t)
	url := "http://127.0.0.1:" + port
	eventually(t, 10*time.Second, "every host up in HAProxy", func() bool {
		seen := map[string]bool{}
		for range 30 {
			seen[statusAndBody(url+"/pid")] = true
		}
		return len(seen) == 3
	})
	rollingRestart(t, hosts, url, true, time.Second) // rise 2, inter 250ms
}

// The nginx upstream and server of docs/deployment.md (no active health
// check: a host whose connections fail is skipped; idempotent requests
// retried on the next host), listening on loopback: no GET is lost while
// each host in turn drains and restarts. (POSTs can be: the page says
// why.)
func TestDeployBehindNginx(t *testing.T) {
	nginx := lookBalancer(t, "nginx")
	hosts := startBalancedHosts(t)
	site := docsBlock(t, "nginx", "upstream app")
	for i, h := range hosts {
		site = strings.ReplaceAll(site, docsHosts[i], "127.0.0.1:"+h.port)
	}
	port := freePort(t)
	if !strings.Contains(site, "    listen 80;") {
		t.Fatalf("the page's nginx server does not listen on 80:\n%s", site)
	}
	site = strings.Replace(site, "    listen 80;", "    listen 127.0.0.1:"+port+";", 1)
	cfg, dir := nginxConfig(t, nginx, site)
	lb := launchCmd(t, exec.Command(nginx, "-c", cfg, "-p", dir), "", nil, "127.0.0.1:"+port)
	lb.waitReady(t)
	// A host nginx found failing is skipped for fail_timeout (5 s).
	rollingRestart(t, hosts, "http://127.0.0.1:"+port, false, 6*time.Second)
}

// haproxyConfig is a config file around the backend: a frontend on
// 127.0.0.1:port sends every request to it. haproxy -c must find it valid.
func haproxyConfig(t *testing.T, haproxy, backend, port string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global
    log stderr format raw local0 warning
defaults
    mode http
    log global
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend web
    bind 127.0.0.1:%s
    default_backend app
%s`, port, backend)), 0o644)
	if out, err := exec.Command(haproxy, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	return cfg
}

// nginxConfig is a config file, and its prefix directory, with site (an
// upstream and a server) in its http block, its files in the directory.
// nginx -t must find it valid.
func nginxConfig(t *testing.T, nginx, site string) (cfg, dir string) {
	t.Helper()
	dir = t.TempDir()
	cfg = filepath.Join(dir, "nginx.conf")
	var temps strings.Builder
	for _, name := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&temps, "    %s_temp_path %s;\n", name, filepath.Join(dir, name))
	}
	os.WriteFile(cfg, []byte(fmt.Sprintf(`daemon off;
pid %s;
error_log stderr warn;
events {}
http {
    access_log off;
%s
%s}
`, filepath.Join(dir, "nginx.pid"), temps.String(), site)), 0o644)
	if out, err := exec.Command(nginx, "-t", "-c", cfg, "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	return cfg, dir
}

// lookBalancer finds a balancer's binary (sbin is not on every PATH).
func lookBalancer(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/" + name)
	}
	need(t, err == nil, name+" (make setup-test installs it)")
	return bin
}
