package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// adminToken is the admin port's token in the tests (the harness sets
// RUVOY_ADMIN_TOKEN to it).
const adminToken = "ruvoy-test-admin-token"

// adminDo asks the admin port with the token.
func adminDo(method, url string, body io.Reader) (*http.Response, error) {
	return adminDoWith(adminToken, method, url, body)
}

func adminDoWith(token, method, url string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return client.Do(req)
}

// adminStatus is the status of a request to the admin port, and its body.
func adminStatus(t *testing.T, token, method, url, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	res, err := adminDoWith(token, method, url, r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b)
}

// With --admin-port any process on the machine could read the config and
// the command line, load a config (a file server rooted at / served
// /etc/passwd) and stop the server. Now, without the admin token /config/,
// /load, /stop and /debug/pprof/ are refused (401) and change nothing,
// while a scraper gets /metrics and a balancer the probes; with the token
// the whole admin API answers. Caddy alone (its admin API on a port)
// is the comparison: it lets the same requests through.
func TestHostileAdminPort(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := start(t, "--admin-port", adminPort, app("core.ru"))
	steal := fmt.Sprintf(`{"apps":{"http":{"servers":{"x":{"listen":["127.0.0.1:%s"],"routes":[{"handle":[{"handler":"file_server","root":"/"}]}]}}}}}`,
		strings.Split(s.addr, ":")[1])
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/config/", ""},
		{"GET", "/debug/pprof/cmdline", ""},
		{"POST", "/load", steal},
		{"POST", "/stop", ""},
		{"DELETE", "/config/apps/http", ""},
	} {
		for _, token := range []string{"", "wrong"} {
			status, body := adminStatus(t, token, tc.method, admin+tc.path, tc.body)
			if status != 401 {
				t.Errorf("%s %s with token %q: %d, want 401", tc.method, tc.path, token, status)
			}
			if strings.Contains(body, "core.ru") || strings.Contains(body, app("core.ru")) {
				t.Errorf("%s %s: the refusal tells the config: %q", tc.method, tc.path, body)
			}
		}
	}
	// Nothing changed: the app serves, not a file server, and the server runs.
	if r := s.get(t, "/etc/passwd"); strings.Contains(r.body, "root:") {
		t.Fatalf("a config loaded without the token served /etc/passwd")
	}
	equal(t, "the app after the refusals", s.get(t, "/sleep?s=0").status, 200)
	// The monitor's endpoints, without the token.
	status, metrics := adminStatus(t, "", "GET", admin+"/metrics", "")
	equal(t, "/metrics without the token", status, 200)
	mustContain(t, "/metrics", metrics, "ruvoy_requests_admitted_total")
	for _, probe := range []string{"/ruvoy/ready", "/ruvoy/health"} {
		status, _ := adminStatus(t, "", "GET", admin+probe, "")
		equal(t, probe+" without the token", status, 200)
	}
	// Addressed to another name than the loopback (DNS rebinding): refused.
	req, _ := http.NewRequest("GET", admin+"/metrics", nil)
	req.Host = "attacker.example:" + adminPort
	if res, err := client.Do(req); err != nil || res.StatusCode != 403 {
		t.Errorf("a request for another host: %v %v, want 403", res, err)
	} else {
		res.Body.Close()
	}
	// With the token: the whole admin API.
	status, cfg := adminStatus(t, adminToken, "GET", admin+"/config/", "")
	equal(t, "/config/ with the token", status, 200)
	mustContain(t, "/config/ with the token", cfg, "core.ru")
	status, cmdline := adminStatus(t, adminToken, "GET", admin+"/debug/pprof/cmdline", "")
	equal(t, "/debug/pprof/cmdline with the token", status, 200)
	mustContain(t, "the command line", cmdline, "--admin-port")
	// The process may be gone before the answer is through.
	if res, err := adminDo("POST", admin+"/stop", nil); err == nil {
		res.Body.Close()
		equal(t, "/stop with the token", res.StatusCode, 200)
	}
	s.wait(t, 20*time.Second)

	// Caddy alone, its admin API on a port: the same requests pass.
	port, caddyAdmin := freePort(t), freePort(t)
	c, _ := runCaddyfile(t, port, fmt.Sprintf("{\n\tadmin 127.0.0.1:%s\n\tauto_https off\n\tpersist_config off\n}\nhttp://:%s {\n\tbind 127.0.0.1\n\trespond \"ok\"\n}\n", caddyAdmin, port))
	status, _ = adminStatus(t, "", "GET", "http://127.0.0.1:"+caddyAdmin+"/config/", "")
	t.Logf("Caddy alone: GET /config/ without a credential: %d", status)
	equal(t, "Caddy alone's /config/ (the comparison)", status, 200)
	c.stop()
}

// Without a token given, ruvoy makes one and prints it once; it works, and
// another does not. The admin API itself listens on a unix socket of mode
// 0600 in a directory of mode 0700, not on a port.
func TestHostileAdminTokenMade(t *testing.T) {
	adminPort := freePort(t)
	admin := "http://127.0.0.1:" + adminPort
	s := startEnv(t, []string{"RUVOY_ADMIN_TOKEN="}, "--admin-port", adminPort, app("core.ru"))
	s.waitStdout(t, "the token", "Authorization: Bearer ")
	m := regexp.MustCompile(`Authorization: Bearer ([0-9a-f]+)`).FindAllStringSubmatch(s.stdout.String(), -1)
	if len(m) != 1 || len(m[0][1]) < 32 {
		t.Fatalf("the token printed: %q in\n%s", m, s.stdout)
	}
	token := m[0][1]
	status, _ := adminStatus(t, token, "GET", admin+"/config/", "")
	equal(t, "/config/ with the printed token", status, 200)
	status, _ = adminStatus(t, adminToken, "GET", admin+"/config/", "")
	equal(t, "/config/ with another token", status, 401)
	if strings.Contains(s.stderr.String(), token) {
		t.Errorf("the token is in the log")
	}
	socket := adminSocketOf(t, s)
	info, err := os.Stat(socket)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the admin API's socket %s: %v, %v; want mode 0600", socket, info.Mode(), err)
	}
	if dir, err := os.Stat(filepath.Dir(socket)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Errorf("its directory: %v, %v; want mode 0700", dir.Mode(), err)
	}
	s.stop()
	if _, err := os.Stat(filepath.Dir(socket)); !os.IsNotExist(err) {
		t.Errorf("the admin socket's directory is left after exit: %v", err)
	}
}

// adminSocketOf is the unix socket a server's admin API listens on: the
// one of its descriptors /proc/net/unix names ruvoy-admin or admin.sock.
func adminSocketOf(t *testing.T, s *server) string {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", s.cmd.Process.Pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.Trim(l[len("socket:"):], "[]")] = true
		}
	}
	b, _ := os.ReadFile("/proc/net/unix")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && inodes[f[6]] && strings.HasSuffix(f[7], "admin.sock") {
			return f[7]
		}
	}
	t.Fatalf("no admin socket among ruvoy's descriptors")
	return ""
}

// --admin-socket serves Caddy's whole admin API on a unix socket of mode
// 0600, without a token: `ruvoy stop --address unix/PATH` stops the server.
func TestHostileAdminSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "admin.sock")
	s := start(t, "--admin-socket", socket, app("core.ru"))
	info, err := os.Stat(socket)
	if err != nil || info.Mode().Perm() != 0o600 || info.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%s: %v, %v; want a socket of mode 0600", socket, info, err)
	}
	over := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	res, err := over.Get("http://127.0.0.1/config/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "/config/ over the socket", res.StatusCode, 200)
	mustContain(t, "/config/ over the socket", string(b), "core.ru")
	res, err = over.Get("http://127.0.0.1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	equal(t, "/metrics over the socket", res.StatusCode, 200)
	out, err := exec.Command(binary(t), "stop", "--address", "unix/"+socket).CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy stop: %v\n%s", err, out)
	}
	equal(t, "exit status after ruvoy stop", s.wait(t, 20*time.Second), 0)
}

// The token leaves the environment before the app boots: neither the app
// nor a worker's sees it.
func TestHostileAdminTokenNotInTheAppsEnvironment(t *testing.T) {
	rackup := filepath.Join(t.TempDir(), "config.ru")
	os.WriteFile(rackup, []byte(`run ->(env) { [200, { "content-type" => "text/plain" }, [ENV.key?("RUVOY_ADMIN_TOKEN").to_s]] }`+"\n"), 0o644)
	for _, mode := range [][]string{nil, {"-w", "1"}} {
		s := start(t, append(append([]string{"--admin-port", freePort(t)}, mode...), rackup)...)
		equal(t, fmt.Sprintf("%v: RUVOY_ADMIN_TOKEN in the app's ENV", mode), s.get(t, "/").body, "false")
	}
}
