package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Peers that no Debian package ships, built from source by bench/peers
// into $RUVOY_PEERS (default /var/cache/ruvoy/peers), outside the
// checkout. A run leaves out those not built there, and says so.

func peersDir() string {
	if d := os.Getenv("RUVOY_PEERS"); d != "" {
		abs, err := filepath.Abs(d) // the servers start in their fixture's directory
		check(err)
		return abs
	}
	return "/var/cache/ruvoy/peers"
}

func peerPath(p string) string { return filepath.Join(peersDir(), p) }

// peerServers are the built peers' cells. None is among issue 8's targets
// (server.ruby): those were set against the packaged servers.
var peerServers = []server{
	// iodine's C engine (facil.io) calling the Rack app on its own
	// threads: one process with 5 of them, as puma -t 5.
	{name: "iodine", label: "iodine -t 5", peer: "iodine/lib/iodine/iodine_ext.so",
		start: func(l launch) *exec.Cmd { return iodine(l, 1) }},
	// Its cluster: -w 2 forks two workers of 5 threads under a master
	// (-w 1 is the single process above, with no master).
	{name: "iodine-w2", label: "iodine -w 2 -t 5", peer: "iodine/lib/iodine/iodine_ext.so", only: clusterScenarios,
		start: func(l launch) *exec.Cmd { return iodine(l, 2) }},
	// Rails 8's default front: Thruster starts Puma itself and proxies to
	// it, with its defaults (below).
	{name: "thruster-puma", label: "thruster -> puma -t 5", peer: "bin/thrust", waitBackend: true,
		noTLS: "TLS only from ACME", start: thruster},
	// agoo as its Rack handler runs it (rackup -s agoo): one process, the
	// app called on one Ruby thread (the handler sets no threads; its own
	// CLI evaluates a config.ru without its file name, which Rails'
	// require_relative needs). bench.ru's scenarios only: on the Rails
	// fixture agoo 2.15.15 ends in a segmentation fault under load.
	{name: "agoo", label: "agoo (rackup -s agoo)", peer: "agoo/lib/agoo/agoo.so", only: benchScenarios(), start: agoo},
}

// benchScenarios are the scenarios on bench/apps/bench.ru over HTTP/1.1.
func benchScenarios() []string {
	var names []string
	for _, sc := range scenarios {
		if sc.app == "" && !sc.h2 {
			names = append(names, sc.name)
		}
	}
	return names
}

func iodine(l launch, workers int) *exec.Cmd {
	dir := peerPath("iodine")
	args := []string{"-I", filepath.Join(dir, "lib"), filepath.Join(dir, "exe", "iodine"),
		"-b", "127.0.0.1", "-p", l.port, "-t", "5", "-w", itoa(workers)}
	if l.tls {
		args = append(args, "-tls-cert", l.cert, "-tls-key", l.key)
	}
	return exec.Command("ruby", append(args, l.rackup)...)
}

// thruster runs `thrust puma ...` with Puma (5 threads) on the backend
// port. Thruster's TLS needs a domain and ACME (Let's Encrypt): none here,
// so it serves plain HTTP/1.1 (HTTP/2 only over its TLS or h2c, off by
// default). Its per-request log is off, as the other servers'. Kept as it
// ships: its HTTP cache (64 MB; only responses marked public with a
// max-age are stored, and no fixture's are), gzip (only for clients that
// ask; wrk does not), X-Sendfile, its timeouts (read and write 30 s, idle
// 60 s), and the proxy's upstream pool (Go's default transport, 2 idle
// connections kept to Puma).
func thruster(l launch) *exec.Cmd {
	if l.tls {
		return nil
	}
	backend := puma(launch{rackup: l.rackup}, 5, l.backend)
	env := []string{"THRUSTER_HTTP_PORT=" + l.port, "THRUSTER_TARGET_PORT=" + l.backend, "THRUSTER_LOG_REQUESTS=false"}
	return exec.Command("env", append(append(env, peerPath("bin/thrust")), backend.Args...)...)
}

func agoo(l launch) *exec.Cmd {
	opts := []string{"-O", "bind=http://127.0.0.1:" + l.port}
	if l.tls {
		opts = []string{"-O", "bind=https://127.0.0.1:" + l.port, "-O", "ssl_cert=" + l.cert, "-O", "ssl_key=" + l.key}
	}
	args := append([]string{"-I", peerPath("agoo/lib"), "-S", "rackup", "-s", "agoo", "-E", "production"}, opts...)
	return exec.Command("ruby", append(args, l.rackup)...)
}

// leftOut are the peers a run left out, not built.
var leftOut []string

// withPeers leaves out the servers whose peer is not built (peersNote
// says so).
func withPeers(list []server) []server {
	var kept []server
	for _, s := range list {
		if s.peer != "" {
			if _, err := os.Stat(peerPath(s.peer)); err != nil {
				leftOut = append(leftOut, s.name)
				continue
			}
		}
		kept = append(kept, s)
	}
	return kept
}

// peersNote says which peers' builds the run used (bench/peers writes
// their versions) and which it left out, with how to build them.
func peersNote(list []server) string {
	var b strings.Builder
	for _, s := range list {
		if s.peer == "" {
			continue
		}
		if v, err := os.ReadFile(peerPath("VERSIONS")); err == nil {
			fmt.Fprintf(&b, "Peers built from source (bench/peers, in %s): %s.\n",
				peersDir(), strings.Join(strings.Split(strings.TrimSpace(string(v)), "\n"), "; "))
		}
		break
	}
	if len(leftOut) > 0 {
		fmt.Fprintf(&b, "Left out, not built in %s: %s (bench/peers builds them; RUVOY_PEERS moves them).\n",
			peersDir(), strings.Join(leftOut, ", "))
	}
	return b.String()
}
