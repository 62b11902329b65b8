package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// YJIT, as production Rubies have it (docs/architecture.md, "YJIT"). make
// e2e (every test) and make e2e-yjit (the Ruby-facing ones) run with
// RUBY_YJIT_ENABLE=1 and RUVOY_TEST_YJIT=1 on a Ruby built with YJIT
// (Debian 12's, or build/ruby-yjit.sh's); these prove that it is on where
// they say, from a request.

// rubyHasYJIT says whether this machine's Ruby was built with YJIT
// (Debian 12's 3.1 was; Debian 13's and forky's 3.3 were not).
func rubyHasYJIT() bool {
	return exec.Command("ruby", "-e", "exit(defined?(RubyVM::YJIT) ? 0 : 1)").Run() == nil
}

// withoutYJITEnv takes RUBY_YJIT_ENABLE, and a RUBYOPT with YJIT's
// options, out of this process's environment, which every server
// inherits, for the rest of the test: under make e2e they are set, Ruby
// 3.1 turns YJIT on when the variable is set at all, whatever its value,
// and a --yjit-* option in RUBYOPT turns it on too. Not for a parallel test.
func withoutYJITEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"RUBY_YJIT_ENABLE", "RUBYOPT"} {
		v, ok := os.LookupEnv(name)
		if !ok || name == "RUBYOPT" && !strings.Contains(v, "--yjit") {
			continue
		}
		os.Unsetenv(name)
		t.Cleanup(func() { os.Setenv(name, v) })
	}
}

// yjitAnswer is test/apps/yjit.ru's answer: the answering process,
// whether YJIT is on there, and the bytes of machine code it has made.
type yjitAnswer struct {
	Pid  int    `json:"pid"`
	YJIT bool   `json:"yjit"`
	Code int    `json:"code"`
	Ruby string `json:"ruby"`
}

// yjitAnswers asks s for /?sleep=0.2, four at a time, until n processes
// have answered (a cluster's balancer gives the next request to the least
// busy worker), and returns each one's last answer.
func yjitAnswers(t *testing.T, s *server, n int) map[int]yjitAnswer {
	t.Helper()
	seen := map[int]yjitAnswer{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes answered in 30 s, not %d: %v", len(seen), n, seen)
		}
		var batch []<-chan yjitAnswer
		for range 4 {
			batch = append(batch, background(t, func(t testing.TB) yjitAnswer {
				r := s.get(t, "/?sleep=0.2")
				var a yjitAnswer
				if r.status != 200 || json.Unmarshal([]byte(r.body), &a) != nil {
					t.Fatalf("GET /?sleep=0.2: %d %q", r.status, r.body)
				}
				return a
			}))
		}
		for _, ch := range batch {
			a, ok := <-ch
			if !ok {
				t.FailNow()
			}
			seen[a.Pid] = a
		}
	}
	return seen
}

// YJIT is on in every process that serves, one process or workers, forked
// from a template or booted each, when the environment asks for it
// (RUBY_YJIT_ENABLE=1, as production's Rubies are run), and has compiled
// the app's code there; and off when nothing asks (the same check, with
// YJIT left off, fails).
func TestYJITFromARequest(t *testing.T) {
	need(t, rubyHasYJIT(), "a Ruby built with YJIT (Debian 12's 3.1 is; make test-yjit builds a 3.3 with it)")
	if os.Getenv("RUVOY_TEST_YJIT") != "" {
		// The YJIT run: every server it starts must have YJIT on.
		equal(t, "RUBY_YJIT_ENABLE under make e2e and e2e-yjit", os.Getenv("RUBY_YJIT_ENABLE"), "1")
	}
	withoutYJITEnv(t)
	for _, mode := range []struct {
		name    string
		args    []string
		workers int
	}{
		{"one process", nil, 1},
		{"-w 2", []string{"-w", "2"}, 2},
		{"-w 2 --preload", []string{"-w", "2", "--preload"}, 2},
	} {
		t.Run(mode.name, func(t *testing.T) {
			on := startEnv(t, []string{"RUBY_YJIT_ENABLE=1"}, append(mode.args, app("yjit.ru"))...)
			for pid, a := range yjitAnswers(t, on, mode.workers) {
				if !a.YJIT || a.Code <= 0 {
					t.Errorf("RUBY_YJIT_ENABLE=1, %s: process %d answered YJIT %v with %d bytes of code (Ruby %s)", mode.name, pid, a.YJIT, a.Code, a.Ruby)
				}
			}
			off := startEnv(t, nil, append(mode.args, app("yjit.ru"))...)
			for pid, a := range yjitAnswers(t, off, mode.workers) {
				if a.YJIT {
					t.Errorf("without RUBY_YJIT_ENABLE, %s: process %d answered YJIT on", mode.name, pid)
				}
			}
		})
	}
}

// A Rails app's own config.yjit (Rails 7.2: on by default, by
// RubyVM::YJIT.enable as the app boots) takes effect under ruvoy as under
// Puma: in one process and in workers forked from a preloaded template,
// with the default and with config.yjit = false. Where Rails has no
// config.yjit (6.1) or Ruby no RubyVM::YJIT.enable (3.1), both servers
// answer off, and still alike.
func TestYJITRailsConfig(t *testing.T) {
	need(t, rubyHasYJIT(), "a Ruby built with YJIT (Debian 12's 3.1 is; make test-yjit builds a 3.3 with it)")
	withoutYJITEnv(t)
	probe, err := exec.Command("ruby", "-e", `require "rails/version"
print((Gem::Version.new(Rails::VERSION::STRING) >= Gem::Version.new("7.2") && defined?(RubyVM::YJIT.enable)) ? "on" : "off")`).Output()
	if err != nil {
		t.Fatalf("which Rails: %v", err)
	}
	byDefault := string(probe)
	for _, c := range []struct {
		name, initializer, want string
	}{
		{"the default", "", byDefault},
		{"config.yjit = false", "Rails.application.config.yjit = false\n", "off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, env := railsApp(t)
			// /yjit answers from the app's process, past the Rails stack;
			// the rest is the app.
			ru := `require_relative "config/environment"
map("/yjit") { run ->(env) { [200, { "content-type" => "text/plain" }, [defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "on" : "off"]] } }
map("/") { run Rails.application }
`
			if err := os.WriteFile(filepath.Join(dir, "yjit.ru"), []byte(ru), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.initializer != "" {
				if err := os.WriteFile(filepath.Join(dir, "config/initializers/yjit.rb"), []byte(c.initializer), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			reference := puma(t, dir, "yjit.ru", env)
			equal(t, "Puma's answer", strings.TrimSpace(getBody(t, reference+"/yjit")), c.want)
			for _, args := range [][]string{nil, {"-w", "2", "--preload"}} {
				port := freePort(t)
				s := launchIn(t, dir, env, port, append(append([]string{"-p", port, "-e", "production"}, args...), "yjit.ru")...)
				s.waitReady(t)
				for i := range 4 {
					equal(t, fmt.Sprintf("ruvoy %v: answer %d", args, i+1), strings.TrimSpace(s.get(t, "/yjit").body), c.want)
				}
			}
		})
	}
}
