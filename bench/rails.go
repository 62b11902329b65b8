package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// railsFixture copies the Rails example once per run (examples/rails where
// Rails 6.1 is installed, examples/rails72 where Rails 7.2 is), migrates
// its SQLite database and adds the article the JSON scenario shows.
func (r *runner) railsFixture() *fixture {
	if r.rails != nil {
		return r.rails
	}
	example := "examples/rails"
	if v, _ := exec.Command("ruby", "-e", `require "rails/version"; print Rails::VERSION::STRING`).Output(); strings.HasPrefix(string(v), "7.2.") {
		example = "examples/rails72"
	}
	dir := filepath.Join(r.out, "rails-app")
	check(exec.Command("cp", "-r", filepath.Join(r.root, example), dir).Run())
	env := []string{"RAILS_ENV=production", "SECRET_KEY_BASE=ruvoy-bench-0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		"RAILS_LOG_LEVEL=warn", "RAILS_FORCE_SSL=false"}
	for _, args := range [][]string{
		{"bin/rails", "db:migrate"},
		{"bin/rails", "runner", `Article.create!(title: "Benchmarked", body: "An article the benchmark reads as JSON.")`},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			check(&setupError{args, string(out)})
		}
	}
	r.rails = &fixture{dir: dir, rackup: filepath.Join(dir, "config.ru"), env: env}
	return r.rails
}

type setupError struct {
	args []string
	out  string
}

func (e *setupError) Error() string { return "preparing the Rails app: " + e.args[1] + ": " + e.out }
