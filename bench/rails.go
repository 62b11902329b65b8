package main

import (
	"os"
	"os/exec"
	"path/filepath"
)

// railsFixture copies examples/rails once per run, migrates its SQLite
// database and adds the article the JSON scenario shows.
func (r *runner) railsFixture() *fixture {
	if r.rails != nil {
		return r.rails
	}
	dir := filepath.Join(r.out, "rails-app")
	check(exec.Command("cp", "-r", filepath.Join(r.root, "examples/rails"), dir).Run())
	env := []string{"RAILS_ENV=production", "SECRET_KEY_BASE=ruvoy-bench-0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		"RAILS_LOG_LEVEL=warn"}
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
