package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// railsArticles is how many articles the Rails fixture holds: the JSON
// scenario shows the first, the page scenario lists them all (the
// scaffold's index, a table row and three links each).
const railsArticles = 100

var railsEnv = []string{"RAILS_ENV=production", "SECRET_KEY_BASE=ruvoy-bench-0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
	"RAILS_LOG_LEVEL=warn", "RAILS_FORCE_SSL=false"}

// railsExample is the example locked to a Rails version: examples/rails
// for Rails 6.1, examples/rails72 for 7.2.
func railsExample(version string) string {
	if strings.HasPrefix(version, "7.2.") {
		return "examples/rails72"
	}
	return "examples/rails"
}

// railsFixture copies the Rails example once per run and per root (d, or
// nil for the host), migrates its SQLite database and adds the articles.
func (r *runner) railsFixture(d *debRoot) *fixture {
	steps := railsSeed()
	if d != nil {
		if d.fixture == nil {
			dir := inRoot + "/bench/.fixture-rails"
			check(os.RemoveAll(d.hostPath(dir)))
			check(exec.Command("cp", "-r", d.hostPath(inRoot+"/"+railsExample(d.rails)), d.hostPath(dir)).Run())
			yjitSetting(r.root, d.hostPath(dir))
			for _, args := range steps {
				if out, err := d.command(r.root, dir, railsEnv, args...).CombinedOutput(); err != nil {
					check(&setupError{args, string(out)})
				}
			}
			d.fixture = &fixture{dir: dir, rackup: dir + "/config.ru", env: railsEnv}
		}
		return d.fixture
	}
	if r.rails != nil {
		return r.rails
	}
	version, _ := exec.Command("ruby", "-e", `require "rails/version"; print Rails::VERSION::STRING`).Output()
	dir := filepath.Join(r.out, "rails-app")
	check(exec.Command("cp", "-r", filepath.Join(r.root, railsExample(string(version))), dir).Run())
	yjitSetting(r.root, dir)
	for _, args := range steps {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), railsEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			check(&setupError{args, string(out)})
		}
	}
	r.rails = &fixture{dir: dir, rackup: filepath.Join(dir, "config.ru"), env: railsEnv}
	return r.rails
}

// railsSeed are the steps that make the fixture's database: its tables,
// and the articles.
func railsSeed() [][]string {
	seed := fmt.Sprintf(`%d.times { |i| Article.create!(title: "Benchmarked #{i + 1}", body: "An article the benchmark reads as JSON and lists on the index page.") }`, railsArticles)
	return [][]string{{"bin/rails", "db:migrate"}, {"bin/rails", "runner", seed}}
}

// yjitSetting gives the Rails app in dir the benchmark's YJIT setting
// (bench/apps/rails-waits/yjit.rb): on for a server started with
// RUBY_YJIT_ENABLE=1, else off, whatever Rails' own default; and the
// warmed template of +warm servers (warm.rb).
func yjitSetting(root, dir string) {
	for _, name := range []string{"yjit.rb", "warm.rb"} {
		b, err := os.ReadFile(filepath.Join(root, "bench/apps/rails-waits", name))
		check(err)
		check(os.WriteFile(filepath.Join(dir, "config/initializers/ruvoy_bench_"+name), b, 0o644))
	}
}

type setupError struct {
	args []string
	out  string
}

func (e *setupError) Error() string { return "preparing the Rails app: " + e.args[1] + ": " + e.out }
