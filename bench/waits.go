package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pages that wait, as production pages do: the Rails example backed by
// PostgreSQL (a cluster this run starts on loopback, as the tests start
// theirs), with a page whose query waits in the database (pg_sleep), one
// that calls an HTTP API (a stand-in in this process answering after 50
// ms) through Net::HTTP, and the scaffold's index as the plain render.
// bench/apps/rails-waits holds the controller, view and YJIT setting the
// fixture gets.

// upstreamDelay is how long the stand-in HTTP API takes to answer.
const upstreamDelay = 50 * time.Millisecond

// pgServer is the run's PostgreSQL, started once when a scenario needs it.
type pgServer struct {
	bin, dir, port string
	as             func(args ...string) *exec.Cmd
}

var (
	pg          *pgServer
	upstreamURL string
	atExit      []func() // run as the benchmark ends, or fails (check)
)

func runAtExit() {
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	atExit = nil
}

// startPostgres initializes a throwaway cluster and starts it on
// 127.0.0.1 (as the postgres user when run as root, which the server
// insists on), with room for every worker's pool.
func startPostgres() *pgServer {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		check(fmt.Errorf("the pages that wait need PostgreSQL's server (make setup-test installs it)"))
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "ruvoy-bench-pg")
	check(err)
	p := &pgServer{bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: freePort(),
		as: func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		check(err)
		check(exec.Command("chown", u.Uid+":"+u.Gid, dir).Run())
		p.as = func(args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
	}
	data := filepath.Join(dir, "data")
	p.run(filepath.Join(p.bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	p.run(filepath.Join(p.bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "start", "-o",
		fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off", p.port, dir))
	atExit = append(atExit, func() {
		p.as(filepath.Join(p.bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run()
		os.RemoveAll(dir)
	})
	return p
}

func (p *pgServer) run(args ...string) {
	if out, err := p.as(args...).CombinedOutput(); err != nil {
		check(fmt.Errorf("%v: %v\n%s", args, err, out))
	}
}

// database creates database name and returns its URL.
func (p *pgServer) database(name string) string {
	p.run(filepath.Join(p.bin, "psql"), "-h", "127.0.0.1", "-p", p.port, "-U", "postgres", "-qc", "CREATE DATABASE "+name)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s", p.port, name)
}

// startUpstream serves the stand-in HTTP API on loopback: a small JSON
// answer after upstreamDelay.
func startUpstream() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(upstreamDelay)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"rate":1.08,"currency":"EUR"}`))
	})}
	go srv.Serve(ln)
	atExit = append(atExit, func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/rates"
}

// railsPGFixture copies the Rails example once per run and per root (d,
// or nil for the host), adds the waiting pages, points it at a database
// of its own in the run's PostgreSQL, migrates it and adds the articles.
func (r *runner) railsPGFixture(d *debRoot) *fixture {
	if pg == nil {
		pg = startPostgres()
		upstreamURL = startUpstream()
	}
	if d != nil && d.pgFixture != nil {
		return d.pgFixture
	}
	if d == nil && r.railsPG != nil {
		return r.railsPG
	}
	// The example as the checkout has it, or as the root's copy has it
	// (its Gemfile.lock locked again against the suite's gems).
	var dir, hostDir, example string
	db := "bench_host"
	if d != nil {
		dir = inRoot + "/bench/.fixture-rails-pg"
		hostDir = d.hostPath(dir)
		example = d.hostPath(inRoot + "/" + railsExample(d.rails))
		db = "bench_" + strings.NewReplacer("-", "_").Replace(d.suite)
	} else {
		out, _ := exec.Command("ruby", "-e", `require "rails/version"; print Rails::VERSION::STRING`).Output()
		dir = filepath.Join(r.out, "rails-pg-app")
		hostDir = dir
		example = filepath.Join(r.root, railsExample(string(out)))
	}
	check(os.RemoveAll(hostDir))
	check(exec.Command("cp", "-r", example, hostDir).Run())
	addWaitingPages(r.root, hostDir)
	env := append(append([]string{}, railsEnv...), "DATABASE_URL="+pg.database(db), "RUVOY_BENCH_UPSTREAM="+upstreamURL)
	for _, args := range railsSeed() {
		var cmd *exec.Cmd
		if d != nil {
			cmd = d.command(r.root, dir, env, args...)
		} else {
			cmd = exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), env...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			check(&setupError{args, string(out)})
		}
	}
	f := &fixture{dir: dir, rackup: dir + "/config.ru", env: env}
	if d != nil {
		d.pgFixture = f
	} else {
		f.rackup = filepath.Join(dir, "config.ru")
		r.railsPG = f
	}
	return f
}

// addWaitingPages copies bench/apps/rails-waits into the Rails app in dir
// and routes /waits/db and /waits/http to it.
func addWaitingPages(root, dir string) {
	src := filepath.Join(root, "bench/apps/rails-waits")
	yjitSetting(root, dir)
	copies := map[string]string{
		"waits_controller.rb": "app/controllers/waits_controller.rb",
		"index.html.erb":      "app/views/waits/index.html.erb",
	}
	for from, to := range copies {
		b, err := os.ReadFile(filepath.Join(src, from))
		check(err)
		check(os.MkdirAll(filepath.Dir(filepath.Join(dir, to)), 0o755))
		check(os.WriteFile(filepath.Join(dir, to), b, 0o644))
	}
	routes := filepath.Join(dir, "config/routes.rb")
	b, err := os.ReadFile(routes)
	check(err)
	const draw = "Rails.application.routes.draw do\n"
	if !strings.Contains(string(b), draw) {
		check(fmt.Errorf("%s: no %q to add the waiting pages after", routes, draw))
	}
	added := draw + "  get \"waits/db\", to: \"waits#db\"\n  get \"waits/http\", to: \"waits#http\"\n"
	check(os.WriteFile(routes, []byte(strings.Replace(string(b), draw, added, 1)), 0o644))
}

// waitScenarios are the pages that wait and the plain render beside them,
// on the PostgreSQL fixture.
var waitScenarios = []scenario{
	{name: "rails-pg-page", label: "Rails scaffold page /articles (100 rows from PostgreSQL, HTML), 10 connections", app: "rails-pg",
		measure: func(t target) sample { return wrk(t, "/articles", 10, "") }},
	{name: "rails-pg-db5", label: "Rails page whose query waits 5 ms in PostgreSQL (pg_sleep), 100 connections", app: "rails-pg",
		measure: func(t target) sample { return wrk(t, "/waits/db?ms=5", 100, "") }},
	{name: "rails-pg-db50", label: "Rails page whose query waits 50 ms in PostgreSQL (pg_sleep), 100 connections", app: "rails-pg",
		measure: func(t target) sample { return wrk(t, "/waits/db?ms=50", 100, "") }},
	{name: "rails-pg-http50", label: "Rails page that calls an HTTP API answering in 50 ms (Net::HTTP), 100 connections", app: "rails-pg",
		measure: func(t target) sample { return wrk(t, "/waits/http", 100, "") }},
}

func waitScenarioNames() []string {
	var n []string
	for _, s := range waitScenarios {
		n = append(n, s.name)
	}
	return n
}

// Servers by the shape of their names, beyond the table (servers.go):
//
//	puma-T[-wN][-preload]  Puma with T threads (N workers), its database
//	                       pool T: RAILS_MAX_THREADS=T, as Rails sizes both
//	ruvoy-wN[-preload]     ruvoy with N workers
//
// and after any server's name, +poolN (RAILS_MAX_THREADS=N: the Rails
// app's database pool, per process), +yjit (RUBY_YJIT_ENABLE=1: YJIT
// on, for the Ruby and the Rails fixtures alike), +warm (the Rails
// fixtures' template, under ruvoy --preload, warmed before it forks:
// bench/apps/rails-waits/warm.rb) and, after a ruvoy, +gcidleMS
// (--gc-when-idle MS: gcidle.go).
var shapeRe = regexp.MustCompile(`^(?:puma-(\d+)|ruvoy)(?:-w(\d+))?(-preload)?$`)

func shapedServer(name string) (server, bool) {
	base, mods, _ := strings.Cut(name, "+")
	s, ok := tableServer(base)
	if !ok {
		m := shapeRe.FindStringSubmatch(base)
		if m == nil {
			return server{}, false
		}
		workers, _ := strconv.Atoi(m[2])
		preload := m[3] != ""
		switch {
		case m[1] != "": // Puma
			threads, _ := strconv.Atoi(m[1])
			s = server{name: base, label: "puma -t " + m[1], ruby: true, start: func(l launch) *exec.Cmd {
				c := puma(l, threads, l.port)
				if workers > 0 {
					c.Args = append([]string{c.Args[0], "-w", itoa(workers)}, c.Args[1:]...)
				}
				if preload {
					c.Args = append([]string{c.Args[0], "--preload"}, c.Args[1:]...)
				}
				return c
			}}
			if workers > 0 {
				s.label = fmt.Sprintf("puma -w %d -t %d", workers, threads)
			}
			if preload {
				s.label += " --preload"
			}
			s.env = []string{"RAILS_MAX_THREADS=" + m[1]}
		case workers > 0 && preload:
			s = ruvoyPreload(workers)
		case workers > 0:
			s = ruvoyWorkers(workers)
		default:
			return server{}, false
		}
		s.only = nil
	}
	if mods == "" {
		return s, true
	}
	s.name = name
	for _, m := range strings.Split(mods, "+") {
		switch {
		case m == "yjit":
			s.env = append(append([]string{}, s.env...), "RUBY_YJIT_ENABLE=1")
			s.label += ", YJIT"
		case strings.HasPrefix(m, "gcidle"):
			if s, ok = withGCIdle(s, strings.TrimPrefix(m, "gcidle")); !ok {
				return server{}, false
			}
		case m == "warm":
			s.env = append(append([]string{}, s.env...), "RUVOY_BENCH_WARM=1")
			s.label += ", warmed template"
		case strings.HasPrefix(m, "pool"):
			n, err := strconv.Atoi(strings.TrimPrefix(m, "pool"))
			if err != nil || n < 1 {
				return server{}, false
			}
			s.env = append(append([]string{}, s.env...), "RAILS_MAX_THREADS="+itoa(n))
			s.label += fmt.Sprintf(", pool %d", n)
		default:
			return server{}, false
		}
	}
	return s, true
}

// shape is what a server's name says of it, for the summary's pairs.
type shape struct {
	suite, kind                  string // "", "forky-yjit"; "ruvoy", "puma"
	threads, workers, pool, mode int    // mode: 0 one process, else workers
	preload, yjit                bool
}

func shapeOf(name string) (shape, bool) {
	var sh shape
	if suite, base, ok := strings.Cut(name, ":"); ok {
		sh.suite, name = suite, base
	}
	base, mods, _ := strings.Cut(name, "+")
	sh.pool = 5 // database.yml's default, and Puma's five threads
	sh.threads = 5
	switch m := regexp.MustCompile(`^(ruvoy|puma)(?:-(\d+))?(?:-w(\d+))?(-preload)?$`).FindStringSubmatch(base); {
	case m == nil:
		return sh, false
	default:
		sh.kind = m[1]
		if m[2] != "" {
			if sh.kind == "ruvoy" {
				return sh, false
			}
			sh.threads, _ = strconv.Atoi(m[2])
			sh.pool = sh.threads
		}
		sh.workers, _ = strconv.Atoi(m[3])
		sh.preload = m[4] != ""
	}
	for _, m := range strings.Split(mods, "+") {
		switch {
		case m == "yjit":
			sh.yjit = true
		case strings.HasPrefix(m, "pool"):
			sh.pool, _ = strconv.Atoi(strings.TrimPrefix(m, "pool"))
		}
	}
	return sh, true
}

// waitsSummary sets each ruvoy beside each Puma of the same suite,
// process shape and YJIT setting, on the pages that wait and the render:
// rate, p99, CPU a request and PSS, and the ratios.
func (r *runner) waitsSummary(servers []server, scens []scenario) string {
	var b strings.Builder
	for _, sc := range scens {
		if sc.app != "rails-pg" {
			continue
		}
		for _, ours := range servers {
			o, ok := shapeOf(ours.name)
			if !ok || o.kind != "ruvoy" {
				continue
			}
			for _, theirs := range servers {
				p, ok := shapeOf(theirs.name)
				if !ok || p.kind != "puma" || p.suite != o.suite || p.workers != o.workers || p.yjit != o.yjit ||
					(o.workers > 0 && p.preload != o.preload) {
					continue
				}
				rv, _ := r.cell(ours.name, sc.name)
				c, _ := r.cell(theirs.name, sc.name)
				if rv.good == 0 || c.good == 0 {
					continue
				}
				if b.Len() == 0 {
					b.WriteString("## Pages that wait (PostgreSQL, an HTTP API) and the render, ruvoy beside Puma\n\n" +
						"Each ruvoy beside each Puma of the same root, process shape and YJIT setting. pool: the Rails app's database pool per process (RAILS_MAX_THREADS; Puma's is its thread count, as Rails sizes both).\n\n" +
						"| page | ruvoy | req/s (p99 ms) | Puma | req/s (p99 ms) | rate ruvoy / Puma | p99 Puma / ruvoy | CPU a request, ruvoy / Puma | PSS MiB, ruvoy / Puma |\n|---|---|---|---|---|---|---|---|---|\n")
				}
				fmt.Fprintf(&b, "| %s | %s | %.1f (%.0f) | %s | %.1f (%.0f) | %.2fx | %.2fx | %s / %s | %.0f / %.0f |\n",
					sc.name, ours.label, rv.value, rv.p99, theirs.label, c.value, c.p99, rv.value/c.value, c.p99/rv.p99,
					perRequest(rv.cpuReq), perRequest(c.cpuReq), rv.pss, c.pss)
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\n"
}
