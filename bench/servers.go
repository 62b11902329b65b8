package main

import (
	"os/exec"
	"path/filepath"
)

// A server under test: how to start it on a port with a rackup.
type server struct {
	name, label string
	cmd         func(root, port, rackup string) *exec.Cmd
}

var servers = []server{
	{"ruvoy", "ruvoy", func(root, port, rackup string) *exec.Cmd {
		return exec.Command(filepath.Join(root, "ruvoy"), "-e", "production", "-p", port, rackup)
	}},
	{"puma-5", "puma -t 5 (single)", func(root, port, rackup string) *exec.Cmd {
		return exec.Command("puma", "-e", "production", "-t", "5:5", "-b", "tcp://127.0.0.1:"+port, rackup)
	}},
	{"puma-100", "puma -t 100 (single)", func(root, port, rackup string) *exec.Cmd {
		return exec.Command("puma", "-e", "production", "-t", "100:100", "-b", "tcp://127.0.0.1:"+port, rackup)
	}},
}

func serverNames() []string {
	var n []string
	for _, s := range servers {
		n = append(n, s.name)
	}
	return n
}

func serverByName(name string) (server, bool) {
	for _, s := range servers {
		if s.name == name {
			return s, true
		}
	}
	return server{}, false
}
