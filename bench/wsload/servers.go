package main

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/ruvoy/ruvoy/internal/testserver"
)

// A server under test, started in root (the checkout) on port. start
// returns a reason instead when the server cannot run here.
type server struct {
	name  string
	start func(root, port string) (*exec.Cmd, string)
}

const rackup = "bench/apps/ws.ru"

var servers = []server{
	{"ruvoy", func(root, port string) (*exec.Cmd, string) {
		return exec.Command(filepath.Join(root, "ruvoy"), "-e", "production", "-p", port, rackup), ""
	}},
	{"ruvoy-w1", func(root, port string) (*exec.Cmd, string) {
		return exec.Command(filepath.Join(root, "ruvoy"), "-e", "production", "-w", "1", "-p", port, rackup), ""
	}},
	// Puma hands the hijacked socket to faye's EventMachine reactor as
	// ruvoy does; its threads only run the handshakes.
	{"puma", func(root, port string) (*exec.Cmd, string) {
		return exec.Command("puma", "-e", "production", "-t", "5:5", "-b", "tcp://127.0.0.1:"+port, rackup), ""
	}},
	// async-http's server with async-websocket, not faye: the same echo
	// and broadcast (bench/servers/async_http_ws.rb). Debian packages
	// neither async-websocket nor protocol-websocket: they run only from a
	// checkout made by hand under /tmp, never committed.
	{"async-websocket", func(root, port string) (*exec.Cmd, string) {
		libs := []string{"/tmp/async-websocket/lib", "/tmp/protocol-websocket/lib"}
		for _, lib := range libs {
			if _, err := os.Stat(lib); err != nil {
				return nil, "skipped: no " + lib + " (async-websocket is not a Debian package; check it out by hand to run this cell)"
			}
		}
		return exec.Command("ruby", "-I", libs[0], "-I", libs[1], "bench/servers/async_http_ws.rb", port), ""
	}},
}

func serverByName(name string) (server, bool) {
	for _, s := range servers {
		if s.name == name {
			return s, true
		}
	}
	return server{}, false
}

func freePort() string {
	port, err := testserver.FreePort()
	check(err)
	return port
}
