package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Servers in a Debian root. "forky:puma-5" is the server puma-5 started in
// the root of Debian's forky suite that build/debian-root.sh makes (once,
// cached in $RUVOY_ROOTS), on that suite's Ruby, Rack and Puma; ruvoy is
// built there from this checkout, so "forky:ruvoy" beside it runs on the
// same Ruby. The load generators stay on the host (the root shares its
// network), and each rooted server is compared with its root's ruvoy.

// A debRoot is one suite's root, prepared once a run.
type debRoot struct {
	suite    string
	dir      string // the root on the host
	versions string // "Ruby 3.3.8, Rack 3.2.7, ..."
	rails    string // its Rails version
	ext      string // the blocking extension built for its Ruby (a path in the root)
	fixture  *fixture
	// pgFixture: the Rails example on PostgreSQL (waits.go)
	pgFixture *fixture
}

var roots = map[string]*debRoot{}

// rootSuites are the roots' suites, in order.
func rootSuites() []string {
	return slices.Sorted(maps.Keys(roots))
}

// inRoot is where the root's copy of this checkout is, inside it.
const inRoot = "/src"

// rootedServers are the cells a default run adds from forky: Puma 8 on
// the no-op app (5 and 100 threads) and Go's net/http alone, both at 100
// connections and one; the Rails page across workers.
var rootedServers = []struct {
	suite, name string
	only        []string
}{
	{"forky", "ruvoy", []string{"noop", "noop-c1", "rails-page"}},
	{"forky", "puma-5", []string{"noop", "noop-c1", "rails-page"}},
	{"forky", "puma-100", []string{"noop", "noop-c1"}},
	{"forky", "go-plain", []string{"noop", "noop-c1"}},
	{"forky", "ruvoy-w1", []string{"rails-page"}},
	{"forky", "ruvoy-w2", []string{"rails-page"}},
	{"forky", "ruvoy-w2-preload", []string{"rails-page"}},
	{"forky", "puma-w1", []string{"rails-page"}},
	{"forky", "puma-w2-preload", []string{"rails-page"}},
}

// rootedServer is server name started in suite's root: "forky:puma-5".
func rootedServer(suite, name string, only []string) (server, bool) {
	s, ok := serverByName(name)
	if !ok || s.start == nil || s.peer != "" { // peers are built for the host's Ruby
		return server{}, false
	}
	d := roots[suite]
	if d == nil {
		base := os.Getenv("RUVOY_ROOTS")
		if base == "" {
			base = "/var/cache/ruvoy"
		}
		d = &debRoot{suite: suite, dir: filepath.Join(base, suite)}
		roots[suite] = d
	}
	s.name, s.label, s.root = suite+":"+name, suite+": "+s.label, d
	if only != nil {
		s.only = only
	}
	return s, true
}

// prepare makes the root if it is not there (build/debian-root.sh), copies
// this checkout into it, builds ruvoy, go-plain and the blocking extension
// there, and reads the versions its cells run on.
func (d *debRoot) prepare(repo string) error {
	fmt.Printf("preparing the Debian %s root (build/debian-root.sh %s; made once, then cached in %s)\n", d.suite, d.suite, d.dir)
	d.ext = inRoot + "/bench/.ext-blocking"
	script := `set -e
make -s ruvoy go-plain
rm -rf "$1" && mkdir -p "$1" && cp test/ext/blocking/extconf.rb test/ext/blocking/blocking.c "$1"
(cd "$1" && ruby extconf.rb >/dev/null && make -s >/dev/null)
ruby -e '
require "rack"
v = ["Ruby #{RUBY_VERSION}", "Rack #{Rack.release}"]
begin; require "rackup/version"; v << "rackup #{Rackup::VERSION}"; rescue LoadError; end
require "puma/const"; v << "Puma #{Puma::Const::PUMA_VERSION}"
require "rails/version"; v << "Rails #{Rails::VERSION::STRING}"
puts "versions: " + v.join(", ")'`
	cmd := exec.Command(filepath.Join(repo, "build/debian-root.sh"), d.suite, "sh", "-c", script, "sh", d.ext)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("preparing the %s root: %v\n%s", d.suite, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "versions: "); ok {
			d.versions = v
			if i := strings.Index(v, "Rails "); i >= 0 {
				d.rails = strings.TrimPrefix(v[i:], "Rails ")
			}
		} else if line != "" {
			fmt.Println(line)
		}
	}
	if d.versions == "" {
		return fmt.Errorf("preparing the %s root: no versions in\n%s", d.suite, out)
	}
	return nil
}

// command runs args in the root's copy (prepared), in dir (a path in the
// root) with env: the root's processes start with an environment of their
// own, so env is all they get beside HOME, PATH and LANG.
func (d *debRoot) command(repo, dir string, env []string, args ...string) *exec.Cmd {
	inner := append(append([]string{"env"}, env...), "sh", "-c", `cd "$0" && exec "$@"`, dir)
	cmd := exec.Command(filepath.Join(repo, "build/debian-root.sh"), append([]string{d.suite}, append(inner, args...)...)...)
	cmd.Env = append(os.Environ(), "RUVOY_ROOT_SRC=keep")
	return cmd
}

// hostPath is where a path in the root is on the host.
func (d *debRoot) hostPath(p string) string { return filepath.Join(d.dir, p) }

// benchFixture is bench/apps/bench.ru in the root's copy.
func (d *debRoot) benchFixture() *fixture {
	return &fixture{dir: inRoot, rackup: inRoot + "/bench/apps/bench.ru"}
}
