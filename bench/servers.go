package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// launch is everything a server needs to start for one fixture.
type launch struct {
	root, out  string // the checkout, this run's results folder
	port       string
	backend    string // a second free port, for a proxy's Puma
	rackup     string
	tls        bool   // terminate TLS (cert and key below)
	cert, key  string // PEM files
	thinRackup string // rackup wrapped in Rack::ContentLength
}

// A server under test. start returns nil when the server cannot serve the
// launch (no TLS support): its cell is reported as not applicable.
type server struct {
	name, label string
	ruby        bool // a Ruby server (a peer in the targets)
	h2          bool // speaks HTTP/2 over TLS
	// closes: the server closes every connection after its answer (no
	// keep-alive). wrk counts each such close as a read error.
	closes bool
	only   []string // when set, the only scenarios it runs
	start  func(l launch) *exec.Cmd
	root   *debRoot // started in a Debian root (roots.go), or nil
	// peer: the file under $RUVOY_PEERS a peer built from source needs
	// (peers.go); the server is left out of a run without it.
	peer string
	// waitBackend: wait for the backend port too, for a front that
	// listens before the backend it starts (Thruster).
	waitBackend bool
	noTLS       string // why start returns nil for TLS, if not "no TLS"
	// named: only in a run whose -servers names it (a setting measured
	// side by side, not a cell of every run).
	named bool
	// env: settings added to the server's environment (a Rails app's
	// database pool, YJIT: waits.go).
	env []string
}

func (s server) runs(sc scenario) bool {
	if len(s.only) > 0 {
		for _, n := range s.only {
			if n == sc.name {
				return true
			}
		}
		return false
	}
	return !sc.h2 || s.h2
}

// ruvoyServer is ruvoy as users start it: one process.
var ruvoyServer = server{name: "ruvoy", label: "ruvoy", h2: true, start: func(l launch) *exec.Cmd {
	args := []string{"-e", "production", "-p", l.port}
	if l.tls {
		args = append(args, "--tls-cert", l.cert, "--tls-key", l.key)
	}
	return exec.Command(filepath.Join(l.root, "ruvoy"), append(args, l.rackup)...)
}}

// servers are every cell's server; the peers built from source
// (peers.go) come last.
var servers = append([]server{
	ruvoyServer,
	{name: "puma-5", label: "puma -t 5", ruby: true, start: func(l launch) *exec.Cmd { return puma(l, 5, l.port) }},
	{name: "puma-100", label: "puma -t 100", ruby: true, start: func(l launch) *exec.Cmd { return puma(l, 100, l.port) }},
	{name: "thin", label: "thin + ContentLength", ruby: true, start: func(l launch) *exec.Cmd {
		args := []string{"-e", "production", "-a", "127.0.0.1", "-p", l.port, "-R", l.thinRackup}
		if l.tls {
			args = append(args, "--ssl", "--ssl-cert-file", l.cert, "--ssl-key-file", l.key)
		}
		return exec.Command("thin", append(args, "start")...)
	}},
	{name: "unicorn", label: "unicorn (1 worker)", ruby: true, closes: true, start: func(l launch) *exec.Cmd {
		if l.tls {
			return nil // unicorn has no TLS
		}
		return exec.Command("unicorn", "-E", "production", "-l", "127.0.0.1:"+l.port, l.rackup)
	}},
	{name: "async-http", label: "async-http + Rack adapter", ruby: true, h2: true, start: func(l launch) *exec.Cmd {
		args := []string{filepath.Join(l.root, "bench/servers/async_http_rack.rb"), l.port, l.rackup}
		if l.tls {
			args = append(args, l.cert, l.key)
		}
		return exec.Command("ruby", args...)
	}},
	{name: "nginx-puma", label: "nginx -> puma -t 5", h2: true, start: func(l launch) *exec.Cmd {
		return behindProxy(l, nginxConfig(l))
	}},
	{name: "caddy-puma", label: "caddy -> puma -t 5", h2: true, start: func(l launch) *exec.Cmd {
		return behindProxy(l, caddyConfig(l, map[string]any{
			"handler": "reverse_proxy", "upstreams": []map[string]string{{"dial": "127.0.0.1:" + l.backend}},
		}))
	}},
	// Cluster mode against Puma's: the CPU-bound and Rails fixtures, where
	// a second core pays, and the no-op ones, where the process hop shows.
	ruvoyWorkers(1), ruvoyWorkers(2), ruvoyPreload(2),
	// The response window, side by side (when named in -servers): what a
	// response holds in Go while its client takes nothing, against what a
	// large one moves (docs/limits.md).
	ruvoyWindow(256 << 10), ruvoyWindow(64 << 10),
	{name: "puma-w1", label: "puma -w 1 -t 5", ruby: true, only: clusterScenarios,
		start: func(l launch) *exec.Cmd { return pumaCluster(l, 1) }},
	{name: "puma-w2", label: "puma -w 2 -t 5", ruby: true, only: clusterScenarios,
		start: func(l launch) *exec.Cmd { return pumaCluster(l, 2) }},
	// Puma's cluster as its docs advise for memory: the app loaded once,
	// before the workers fork, so they share its pages.
	{name: "puma-w2-preload", label: "puma -w 2 -t 5 --preload", ruby: true, only: clusterScenarios,
		start: func(l launch) *exec.Cmd {
			c := pumaCluster(l, 2)
			c.Args = append([]string{c.Args[0], "--preload"}, c.Args[1:]...)
			return c
		}},
	// The ceiling: Caddy answering by itself under ruvoy's server config.
	{name: "caddy-static", label: "caddy static_response", h2: true,
		only: append([]string{"noop", "noop-pinned", "noop-c1", "tls", "h2"}, sweepNames...), start: func(l launch) *exec.Cmd {
			return caddyConfig(l, map[string]any{
				"handler": "static_response", "body": "hello world\n",
				"headers": map[string][]string{"Content-Type": {"text/plain"}},
			})
		}},
	// Caddy as users know it, a plain Caddyfile that answers by itself:
	// the ceiling issue 21 measures against (no ruvoy wrapper or setting).
	{name: "caddy-respond", label: "caddy respond (plain Caddyfile)",
		only: append([]string{"noop", "noop-pinned", "noop-c1"}, sweepNames...), start: func(l launch) *exec.Cmd {
			file := filepath.Join(l.out, "Caddyfile-"+l.port)
			check(os.WriteFile(file, []byte(fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n}\n"+
				"http://127.0.0.1:%s {\n\trespond \"hello world\" 200\n}\n", l.port)), 0o644))
			return exec.Command(filepath.Join(l.root, "ruvoy"), "run", "--adapter", "caddyfile", "--config", file)
		}},
	// Go's net/http answering by itself (bench/plain): the floor of the
	// HTTP layer under Caddy, for the goals that sit near it. With Go's
	// sysmon kept awake as ruvoy keeps it (cmd/ruvoy/sysmon.go), so the
	// floor is not lower than ruvoy's own runtime setting.
	{name: "go-plain", label: "Go net/http alone (no Caddy, no Ruby)",
		only: append([]string{"noop", "noop-pinned", "noop-c1", "1mib"}, sweepNames...), start: func(l launch) *exec.Cmd {
			return exec.Command("env", "GODEBUG=schedtrace=2147483647",
				filepath.Join(l.root, "go-plain"), "-addr", "127.0.0.1:"+l.port)
		}},
	// The diagnostic: ruvoy's runtime under plain net/http, no Caddy.
	{name: "ruvoy-nethttp", label: "ruvoy runtime, net/http", only: []string{"noop", "noop-pinned", "noop-c1"},
		start: func(l launch) *exec.Cmd {
			return exec.Command(filepath.Join(l.root, "ruvoy-nethttp"), "-addr", "127.0.0.1:"+l.port, l.rackup)
		}},
}, peerServers...)

// ruvoyWithEnv is ruvoy started with extra environment settings, to measure
// a setting side by side with the default (bench/run -ruvoy-env). The
// runner replaces a command's environment, hence env(1).
func ruvoyWithEnv(settings string) server {
	s, _ := serverByName("ruvoy")
	base := s.start
	s.name, s.label = "ruvoy-env", "ruvoy, "+settings
	s.start = func(l launch) *exec.Cmd {
		c := base(l)
		return exec.Command("env", append(append(strings.Fields(settings), c.Path), c.Args[1:]...)...)
	}
	return s
}

var clusterScenarios = []string{"noop", "noop-c1", "cpu", "rails-json", "rails-page", "rails-page-paced",
	"rails-pg-page", "rails-pg-db5", "rails-pg-db50", "rails-pg-http50"}

func ruvoyWorkers(n int) server {
	s := ruvoyServer
	base := s.start
	s.name, s.label, s.only = "ruvoy-w"+itoa(n), "ruvoy -w "+itoa(n), clusterScenarios
	s.start = func(l launch) *exec.Cmd {
		c := base(l)
		c.Args = append([]string{c.Args[0], "-w", itoa(n)}, c.Args[1:]...)
		return c
	}
	return s
}

// ruvoyPreload is ruvoy -w n --preload: the workers forked from a template
// that loaded the app, as Puma's --preload forks them from its master.
func ruvoyPreload(n int) server {
	s := ruvoyWorkers(n)
	base := s.start
	s.name, s.label = s.name+"-preload", s.label+" --preload"
	s.start = func(l launch) *exec.Cmd {
		c := base(l)
		c.Args = append([]string{c.Args[0], "--preload"}, c.Args[1:]...)
		return c
	}
	return s
}

func pumaCluster(l launch, workers int) *exec.Cmd {
	c := puma(l, 5, l.port)
	c.Args = append([]string{c.Args[0], "-w", itoa(workers)}, c.Args[1:]...)
	return c
}

func puma(l launch, threads int, port string) *exec.Cmd {
	bind := "tcp://127.0.0.1:" + port
	if l.tls && port == l.port {
		bind = "ssl://127.0.0.1:" + port + "?cert=" + l.cert + "&key=" + l.key + "&verify_mode=none"
	}
	t := itoa(threads)
	return exec.Command("puma", "-e", "production", "-t", t+":"+t, "-b", bind, l.rackup)
}

// behindProxy starts Puma (5 threads) on the backend port, waits for it,
// then runs the proxy in the foreground; both share the process group the
// runner stops.
func behindProxy(l launch, proxy *exec.Cmd) *exec.Cmd {
	backend := puma(launch{port: "", rackup: l.rackup}, 5, l.backend)
	script := shellJoin(backend.Args) + " &\n" +
		"until (exec 3<>/dev/tcp/127.0.0.1/" + l.backend + ") 2>/dev/null; do sleep 0.1; done\n" +
		"exec " + shellJoin(proxy.Args) + "\n"
	return exec.Command("bash", "-c", script)
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func serverNames() []string {
	var n []string
	for _, s := range servers {
		if !s.named {
			n = append(n, s.name)
		}
	}
	for _, s := range rootedServers {
		n = append(n, s.suite+":"+s.name)
	}
	return n
}

// serverByName finds a server, or with "SUITE:" before its name the same
// server in that Debian suite's root (roots.go).
func serverByName(name string) (server, bool) {
	if suite, base, ok := strings.Cut(name, ":"); ok {
		var only []string
		for _, s := range rootedServers {
			if s.suite == suite && s.name == base {
				only = s.only
			}
		}
		return rootedServer(suite, base, only)
	}
	return shapedServer(name)
}

// tableServer is the server of that name in the table above.
func tableServer(name string) (server, bool) {
	for _, s := range servers {
		if s.name == name {
			return s, true
		}
	}
	return server{}, false
}

// ruvoyWindow is ruvoy's own generated config with the handler's
// response_window set to n bytes, under `ruvoy run` (with Go's processors
// following the load, as `ruvoy config.ru` has them).
func ruvoyWindow(n int) server {
	return server{name: "ruvoy-rw" + itoa(n>>10), label: "ruvoy, response_window " + itoa(n>>10) + " KiB", h2: true, named: true,
		only: []string{"noop", "1mib", "ttfb", "h2"}, start: func(l launch) *exec.Cmd {
			bin := filepath.Join(l.root, "ruvoy")
			args := []string{"--print-config", "-e", "production", "-p", l.port}
			if l.tls {
				args = append(args, "--tls-cert", l.cert, "--tls-key", l.key)
			}
			out, err := exec.Command(bin, append(args, l.rackup)...).Output()
			check(err)
			var cfg map[string]any
			check(json.Unmarshal(out, &cfg))
			srv := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["ruvoy"].(map[string]any)
			for _, route := range srv["routes"].([]any) {
				for _, h := range route.(map[string]any)["handle"].([]any) {
					if h := h.(map[string]any); h["handler"] == "ruvoy" {
						h["response_window"] = n
					}
				}
			}
			file := filepath.Join(l.out, fmt.Sprintf("ruvoy-rw%d-%s.json", n>>10, l.port))
			b, _ := json.MarshalIndent(cfg, "", "  ")
			check(os.WriteFile(file, b, 0o644))
			return exec.Command("env", "RUVOY_PROCS_BY_LOAD=1", bin, "run", "--config", file)
		}}
}
