package test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A fleet of three ruvoy hosts behind Caddy's reverse_proxy (the ruvoy
// binary itself, `ruvoy run`), on one machine: each host in its own network
// namespace, the balancer on the bridge that joins them (fleet_net_test.go).

// fleetHealthFlags make a host answer the balancer's health check from Go,
// and, on SIGTERM, serve on for 2 s while it answers 503 (the balancer
// checks every 250 ms), then stop taking connections.
var fleetHealthFlags = []string{"--health-path", "/up", "--drain-delay", "2"}

// fleetCaddyfile is the balancer's configuration: round robin over the
// hosts, an active health check every 250 ms (one failure takes a host out,
// two passes bring it back), and a request that finds no host or cannot
// reach one retried on another for up to 5 s.
func fleetCaddyfile(n *fleetNet, port string) string {
	var upstreams []string
	for _, h := range n.hosts {
		upstreams = append(upstreams, h.addr())
	}
	return fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}
http://%s:%s {
	bind %s
	reverse_proxy %s {
		lb_policy round_robin
		lb_try_duration 5s
		lb_try_interval 100ms
		health_uri /up
		health_interval 250ms
		health_timeout 2s
		health_fails 1
		health_passes 2
	}
}
`, n.gateway, port, n.gateway, strings.Join(upstreams, " "))
}

// startBalancer serves fleetCaddyfile on the bridge's address.
func startBalancer(t *testing.T, n *fleetNet) *server {
	t.Helper()
	port := freePort(t)
	caddyfile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(fleetCaddyfile(n, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := launchNS(t, "", "", nil, n.gateway+":"+port, "run", "--config", caddyfile, "--adapter", "caddyfile")
	s.waitReady(t)
	return s
}

// startFleetHost starts host h serving rackup (h2 with two workers),
// trusting the balancer's X-Forwarded-For.
func startFleetHost(t *testing.T, n *fleetNet, h fleetHost, rackup string) *server {
	t.Helper()
	args := []string{"--grace", "10", "--trusted-proxies", n.gateway + "/32"}
	if h.name == "h2" {
		args = append(args, "-w", "2")
	}
	return launchFleetHost(t, h, "", []string{"FLEET_HOST=" + h.name}, append(args, app(rackup))...)
}

// launchFleetHost starts ruvoy on host h with the health flags and args,
// in dir with env added, and waits until its health path answers 200.
func launchFleetHost(t *testing.T, h fleetHost, dir string, env []string, args ...string) *server {
	t.Helper()
	args = append(append([]string{"-a", h.ip, "-p", fleetHostPort}, fleetHealthFlags...), args...)
	s := launchNS(t, h.ns, dir, env, h.addr(), args...)
	s.waitReady(t)
	eventually(t, 60*time.Second, h.name+" answers its health path", func() bool {
		status, body := fleetGet(s.url + "/up")
		return status == 200 && body == "ok\n"
	})
	return s
}

// fleetGet GETs url on a connection of its own: the status and body, 0
// when there is no answer.
func fleetGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b)
}

// stopFleetHost sends SIGTERM and waits for the exit status; meanwhile the
// host's health path must say it is leaving (503) before it stops
// accepting, which --drain-delay holds off for 2 s.
func stopFleetHost(t *testing.T, h fleetHost, s *server) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var said []string
	for draining := false; !draining; time.Sleep(20 * time.Millisecond) {
		status, body := fleetGet(s.url + "/up")
		said = append(said, fmt.Sprintf("%d %q", status, body))
		if status == 0 {
			t.Fatalf("%s stopped accepting before its health path answered 503: %s", h.name, strings.Join(said, ", "))
		}
		draining = status == 503 && strings.HasPrefix(body, "draining")
	}
	return s.wait(t, 30*time.Second)
}

// beginStream starts a stream of n chunks straight from the server at
// url and reads its first chunk; the function it returns waits for the
// rest and says what was wrong with it ("" when nothing).
func beginStream(t *testing.T, url string, n int) func() string {
	t.Helper()
	res, err := client.Get(fmt.Sprintf("%s/stream?n=%d", url, n))
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, fleetChunkSize)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatalf("the first chunk: %v", err)
	}
	who, _, _ := strings.Cut(string(first), fmt.Sprintf(" 0/%d ", n))
	done := make(chan string, 1)
	go func() {
		defer res.Body.Close()
		rest, err := io.ReadAll(res.Body)
		var want strings.Builder
		for i := 1; i < n; i++ {
			want.WriteString(fleetChunk(who, i, n))
		}
		switch {
		case err != nil:
			done <- fmt.Sprintf("%d of %d bytes, then %v", len(first)+len(rest), n*fleetChunkSize, err)
		case string(rest) != want.String():
			done <- fmt.Sprintf("%d bytes, not those sent", len(first)+len(rest))
		default:
			done <- ""
		}
	}()
	return func() string {
		select {
		case problem := <-done:
			return problem
		case <-time.After(30 * time.Second):
			return "not over 30s later"
		}
	}
}

// The rolling deploy: with clients sending requests through the balancer
// all along, each host in turn is stopped (SIGTERM), waited for, and
// started again with version 2 of the app; no request fails, no stream is
// cut. Then a host is killed (SIGKILL): only what it was sending is lost.
// Then who the hosts see as the client, through the balancer and not.
func TestFleetRollingDeploy(t *testing.T) {
	n := setupFleetNet(t)
	hosts := make([]*server, len(n.hosts))
	for i, h := range n.hosts {
		hosts[i] = startFleetHost(t, n, h, "fleet_v1.ru")
	}
	lb := startBalancer(t, n)
	const clients = 8
	load := startFleetLoad(lb.url, clients)
	defer load.finish() // a failure below leaves no client running
	for _, h := range n.hosts {
		eventually(t, 30*time.Second, h.name+" answers through the balancer", func() bool {
			return load.count("v1 host="+h.name) > 0
		})
	}

	began := time.Now()
	for i, h := range n.hosts {
		// A stream from before the SIGTERM to after the drain: the
		// graceful stop lets it finish (--grace).
		across := beginStream(t, hosts[i].url, 80)
		stopping := time.Now()
		equal(t, h.name+"'s exit status after SIGTERM", stopFleetHost(t, h, hosts[i]), 0)
		stopped := time.Since(stopping)
		if problem := across(); problem != "" {
			t.Errorf("%s: a stream begun before the SIGTERM and lasting 4 s: %s", h.name, problem)
		}
		hosts[i] = startFleetHost(t, n, h, "fleet_v2.ru")
		eventually(t, 30*time.Second, h.name+" answers v2 through the balancer", func() bool {
			return load.count("v2 host="+h.name) > 0
		})
		t.Logf("%s: stopped in %v, back with v2 after %v", h.name, stopped.Round(time.Millisecond),
			time.Since(stopping).Round(time.Millisecond))
	}
	deployed := time.Since(began)
	atDeploy, _ := load.snapshot()
	time.Sleep(time.Second) // v2 only from now on
	settled, _ := load.snapshot()
	t.Logf("rolling deploy of %d hosts in %v: %d requests whole (%s), %d failed, %d cut short",
		len(n.hosts), deployed.Round(time.Millisecond), atDeploy.total(), atDeploy.byWho(), atDeploy.failed(), atDeploy.cut())
	for _, p := range settled.problems {
		t.Errorf("%v", p)
	}
	equal(t, "failed requests during the deploy", settled.failed(), 0)
	equal(t, "answers cut short during the deploy", settled.cut(), 0)
	after := settled.since(atDeploy)
	for _, h := range n.hosts {
		if after.ok["v2 host="+h.name] == 0 {
			t.Errorf("%s gave no v2 answer after the deploy: %s", h.name, after.byWho())
		}
		if after.ok["v1 host="+h.name] > 0 {
			t.Errorf("%s still answered v1 after the deploy: %s", h.name, after.byWho())
		}
	}

	// SIGKILL, once the host sends a stream: what was in flight to it may
	// be lost (answers cut short, POSTs answered 502: Caddy does not
	// resend them), no more; a GET not yet answered is retried elsewhere.
	victim := n.hosts[2]
	var before fleetFigures
	var streaming map[string]int
	eventually(t, 30*time.Second, victim.name+" sends a stream", func() bool {
		before, streaming = load.snapshot()
		return streaming["v2 host="+victim.name] > 0
	})
	if err := hosts[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hosts[2].wait(t, 10*time.Second)
	time.Sleep(2 * time.Second) // eight health checks: the balancer has taken it out
	noticed, _ := load.snapshot()
	time.Sleep(2 * time.Second)
	later, _ := load.snapshot()
	killed, rest := noticed.since(before), later.since(noticed)
	t.Logf("SIGKILL of %s with %d of its streams under way: %d failed, %d cut, %d requests whole (%s); then %d whole (%s), %d failed or cut",
		victim.name, streaming["v2 host="+victim.name], killed.failed(), killed.cut(), killed.total(), killed.byWho(),
		rest.total(), rest.byWho(), len(rest.problems))
	for _, p := range append(killed.problems, rest.problems...) {
		t.Logf("%v", p)
	}
	if lost := len(killed.problems); lost > clients {
		t.Errorf("%d requests lost at the SIGKILL of %s, more than the %d in flight at most", lost, victim.name, clients)
	}
	for _, p := range killed.problems {
		lost := p.cut && p.from == "v2 host="+victim.name || p.req == "POST /echo" && strings.HasPrefix(p.what, "502 ")
		if !lost {
			t.Errorf("lost at the SIGKILL of %s, but neither cut short by it nor a POST: %v", victim.name, p)
		}
	}
	equal(t, "requests that failed once the balancer noticed", len(rest.problems), 0)
	if rest.ok["v2 host=h1"] == 0 || rest.ok["v2 host=h2"] == 0 || rest.total() != rest.ok["v2 host=h1"]+rest.ok["v2 host=h2"] {
		t.Errorf("after the SIGKILL, answers from h1 and h2 expected, and only them: %s", rest.byWho())
	}
	final := load.finish()
	t.Logf("all in all: %d requests whole (%s), %d failed, %d cut", final.total(), final.byWho(), final.failed(), final.cut())

	// Who the client is. Through the balancer, the hosts see the client's
	// address (X-Forwarded-For from the balancer, which they trust); the
	// balancer replaces what a client claims with the address it sees.
	curl := func(url string, header ...string) string {
		args := []string{"curl", "-sS", "--max-time", "20", "--fail"}
		for _, h := range header {
			args = append(args, "-H", h)
		}
		return inNS(t, fleetClientNS, append(args, url)...)
	}
	equal(t, "REMOTE_ADDR through the balancer", curl(lb.url+"/ip"), n.client)
	equal(t, "X-Forwarded-For through the balancer", curl(lb.url+"/xff"), n.client)
	spoofed := "X-Forwarded-For: 203.0.113.9"
	equal(t, "REMOTE_ADDR through the balancer, XFF claimed", curl(lb.url+"/ip", spoofed), n.client)
	equal(t, "X-Forwarded-For through the balancer, XFF claimed", curl(lb.url+"/xff", spoofed), n.client)
	// Straight to a host, the client is no trusted proxy: its claim is dropped.
	direct := hosts[0].url
	equal(t, "REMOTE_ADDR straight to h1, XFF claimed", curl(direct+"/ip", spoofed), n.client)
	equal(t, "X-Forwarded-For straight to h1, XFF claimed", curl(direct+"/xff", spoofed), "(none)")
}

// Action Cable across hosts: the Rails example on hosts h1 and h3, its
// broadcasts through PostgreSQL (LISTEN/NOTIFY) on the bridge. A
// subscriber on h1 gets what is posted on h3, byte for byte; h1 is
// redeployed (SIGTERM, started again), the subscriber connects again and
// gets the next broadcast from h3.
func TestFleetBroadcastAcrossHosts(t *testing.T) {
	n := setupFleetNet(t)
	db := startPostgresAt(t, "cable", n.gateway, n.subnet)
	a, c := n.hosts[0], n.hosts[2]
	dirA, env := railsApp(t, "DATABASE_URL="+db, "CABLE_ADAPTER=postgresql")
	dirC, _ := railsApp(t, "DATABASE_URL="+db, "CABLE_ADAPTER=postgresql") // migrated already
	rails := func(h fleetHost, dir string) *server {
		return launchFleetHost(t, h, dir, env, "-e", "production", "config.ru")
	}
	onA, onC := rails(a, dirA), rails(c, dirC)

	sub := dialCable(t, onA, onA.url)
	sub.subscribe(lobby)
	p := newPoster(t, onC, "lobby")
	equal(t, "POST on h3", p.post(t, "lobby", trickyBody), 204)
	equal(t, "the broadcast on h1", sub.next(), roomMessage("lobby", trickyJSON))

	stopping := time.Now()
	equal(t, "h1's exit status after SIGTERM", stopFleetHost(t, a, onA), 0)
	t.Logf("h1 stopped in %v with a WebSocket open", time.Since(stopping).Round(time.Millisecond))
	// The old connection is closed, not left hanging.
	for closed := false; !closed; {
		select {
		case m, ok := <-sub.recv:
			if ok {
				t.Logf("on the old connection before it closed: %s", m)
			}
			closed = !ok
		case <-time.After(30 * time.Second):
			t.Fatal("h1 exited, but the old WebSocket connection is still open 30s later")
		}
	}
	onA = rails(a, dirA)
	sub = dialCable(t, onA, onA.url)
	sub.subscribe(lobby)
	equal(t, "POST on h3 after h1's redeploy", p.post(t, "lobby", "after the redeploy"), 204)
	equal(t, "the broadcast on h1 after its redeploy", sub.next(), roomMessage("lobby", `"after the redeploy"`))
}
