package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// YJIT's own memory a process: a server started with RUBY_YJIT_ENABLE=1
// (+yjit, waits.go) also gets bench/apps/yjit_stats.rb (RUBYOPT=-r), which
// writes RubyVM::YJIT.runtime_stats' sizes for each of its processes into
// a directory of the round's; they are read once the server has stopped.

// yjitProc is one process's sizes, in bytes, as the server stopped.
type yjitProc map[string]float64

func (s server) yjit() bool { return slices.Contains(s.env, "RUBY_YJIT_ENABLE=1") }

// yjitStats is the server's environment for fixture f, with the stats
// writer when YJIT is on; and where the files go, on the host ("": none).
func (r *runner) yjitStats(srv server, round int, f *fixture) ([]string, string) {
	if !srv.yjit() {
		return srv.env, ""
	}
	tag := fmt.Sprintf("%s-%s-round%d", strings.ReplaceAll(srv.name, ":", "-"), filepath.Base(f.dir), round+1)
	script := filepath.Join(r.root, "bench/apps/yjit_stats.rb")
	dir := filepath.Join(r.out, "yjit-stats", tag)
	host := dir
	if srv.root != nil {
		script = inRoot + "/bench/apps/yjit_stats.rb"
		dir = inRoot + "/bench/.yjit-stats/" + tag
		host = srv.root.hostPath(dir)
	}
	check(os.MkdirAll(host, 0o777))
	return append(append([]string{}, srv.env...), "RUBYOPT=-r"+script, "RUVOY_BENCH_YJIT_STATS="+dir), host
}

// readYJITStats keeps the sizes of each process that compiled code.
func (r *runner) readYJITStats(srv server, dir string) {
	if dir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "[0-9]*"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		p := yjitProc{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				p[k], _ = strconv.ParseFloat(v, 64)
			}
		}
		if p["inline_code_size"] > 0 {
			r.yjitMem[srv.name] = append(r.yjitMem[srv.name], p)
		}
	}
}

// yjitSummary is each YJIT server's medians a process.
func (r *runner) yjitSummary(servers []server) string {
	var b strings.Builder
	mib := func(ps []yjitProc, key string) string {
		var v []float64
		for _, p := range ps {
			if p[key] > 0 {
				v = append(v, p[key]/(1<<20))
			}
		}
		if len(v) == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f", median(v))
	}
	for _, srv := range servers {
		ps := r.yjitMem[srv.name]
		if len(ps) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("## YJIT's own memory, a process\n\nMedians over every process that compiled code, in every round and fixture (RubyVM::YJIT.runtime_stats as the server stopped): the code region YJIT has mapped and written, its Rust allocations (metadata), and the machine code itself.\n\n| server | processes | code region MiB | YJIT allocations MiB | inline + outlined code MiB |\n|---|---|---|---|---|\n")
		}
		code := make([]yjitProc, len(ps))
		for i, p := range ps {
			code[i] = yjitProc{"code": p["inline_code_size"] + p["outlined_code_size"]}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", srv.label, len(ps), mib(ps, "code_region_size"), mib(ps, "yjit_alloc_size"), mib(code, "code"))
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\n"
}
