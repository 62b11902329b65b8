package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// reloadBound is how long the first request after an edit may take: Puma
// answers it in 0.03-0.2 s; under the bug this test guards, Rails 6.1 waited
// twice its checkout timeout (10 s) for the reloading request's own
// database connection. Generous for a busy machine.
const reloadBound = 3 * time.Second

// In development, after a request that used Active Record, an edit to a
// controller, a model or config/routes.rb is picked up by the next
// request, which answers in well under a second (not after Active
// Record's 10 s wait for a connection it took for another's), and ten
// requests that come together while the code reloads all answer 200 (none
// times out waiting for a connection). The example app is a copy: the
// edits stay out of the tree.
//
// The same in one process and in cluster mode, workers started anew or
// forked from a template: each worker reloads for itself.
func TestFrameworksRailsReload(t *testing.T) {
	for _, mode := range []struct {
		name string
		args []string
	}{{"one process", nil}, {"-w 2", []string{"-w", "2"}}, {"-w 2 --preload", []string{"-w", "2", "--preload"}}} {
		t.Run(mode.name, func(t *testing.T) { railsReload(t, mode.args) })
	}
}

func railsReload(t *testing.T, args []string) {
	dir := copyTree(t, railsExample(t))
	env := []string{"RAILS_ENV=development"}
	migrate := exec.Command("bin/rails", "db:migrate")
	migrate.Dir = dir
	migrate.Env = append(os.Environ(), env...)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("bin/rails db:migrate: %v\n%s", err, out)
	}
	port := freePort(t)
	s := launchIn(t, dir, env, port, append(append([]string{"-p", port, "-e", "development"}, args...), "config.ru")...)
	s.waitReady(t)
	// The first requests, which read the articles: several at once, so
	// that each worker has served (and loaded the app's code) before the
	// edits.
	var first sync.WaitGroup
	for range 6 {
		first.Add(1)
		go func() {
			defer first.Done()
			t := inGoroutine(t)
			equal(t, "a first request, which reads the articles", s.get(t, "/articles").status, 200)
		}()
	}
	first.Wait()

	// edit replaces old with new in an app file. The file watcher compares
	// modification times: the edit comes in a later second than the last.
	edit := func(file, old, new string) {
		t.Helper()
		time.Sleep(1100 * time.Millisecond)
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s: %v, or no %q in it", file, err, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// after times the first request after an edit, and checks the edit
	// shows in its answer (X-Edit: the controller's, then the model's).
	after := func(what, path, mark string) {
		t.Helper()
		began := time.Now()
		r := s.get(t, path)
		took := time.Since(began)
		t.Logf("the request after an edit to %s: %v", what, took)
		equal(t, "the request after an edit to "+what, r.status, 200)
		equal(t, "what the edit changed", r.header.Get("X-Edit"), mark)
		if took > reloadBound {
			t.Errorf("the request after an edit to %s took %v, want under %v", what, took, reloadBound)
		}
	}

	edit("app/controllers/articles_controller.rb", "  def index\n",
		"  def index\n    response.set_header(\"X-Edit\", Article.respond_to?(:edit_mark) ? Article.edit_mark : \"controller\")\n")
	after("the controller", "/articles", "controller")
	edit("app/models/article.rb", "class Article < ApplicationRecord\n",
		"class Article < ApplicationRecord\n  def self.edit_mark\n    \"model\"\n  end\n")
	after("the model", "/articles", "model")
	equal(t, "a route not drawn yet", s.get(t, "/edited").status, 404)
	edit("config/routes.rb", "  resources :articles\n", "  resources :articles\n  get \"edited\", to: \"articles#index\"\n")
	after("config/routes.rb", "/edited", "model")

	edit("app/models/article.rb", `"model"`, `"model again"`)
	var wg sync.WaitGroup
	statuses := make([]int, 10)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = s.get(t, "/articles").status
		}()
	}
	wg.Wait()
	for i, status := range statuses {
		if status != 200 {
			t.Errorf("request %d of 10 during the reload: %d, want 200", i, status)
		}
	}
	equal(t, "the model after the reload", s.get(t, "/articles").header.Get("X-Edit"), "model again")
	equal(t, "exit status", s.stop(), 0)
}
