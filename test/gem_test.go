package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	gemOnce sync.Once
	gemPath string
	gemErr  error
)

// builtGem runs `make gem` once and returns pkg/ruvoy-*.gem.
func builtGem(t *testing.T) string {
	t.Helper()
	gemOnce.Do(func() {
		out, err := exec.Command("make", "-C", "..", "gem").CombinedOutput()
		if err != nil {
			gemErr = &buildError{cmd: "make gem", out: string(out)}
			return
		}
		matches, _ := filepath.Glob("../pkg/ruvoy-*.gem")
		if len(matches) != 1 {
			gemErr = &buildError{cmd: "make gem", out: "want one pkg/ruvoy-*.gem, found " + strings.Join(matches, " ")}
			return
		}
		gemPath, _ = filepath.Abs(matches[0])
	})
	if gemErr != nil {
		t.Fatal(gemErr)
	}
	return gemPath
}

// installGem installs the gem into a fresh GEM_HOME and returns the
// environment that sees it.
func installGem(t *testing.T) (home string, env []string) {
	t.Helper()
	gem := builtGem(t)
	home = t.TempDir()
	out, err := exec.Command("gem", "install", "--local", "--no-document", "--install-dir", home, gem).CombinedOutput()
	if err != nil {
		t.Fatalf("gem install: %v\n%s", err, out)
	}
	defaults, _ := exec.Command("ruby", "-e", "print Gem.default_path.join(':')").Output()
	return home, []string{"GEM_HOME=" + home, "GEM_PATH=" + home + ":" + string(defaults), "PATH=" + home + "/bin:" + os.Getenv("PATH")}
}

func TestShipGemInstallAndServe(t *testing.T) {
	home, env := installGem(t)
	spec, _ := exec.Command("gem", "spec", builtGem(t), "metadata").Output()
	abi := rubyABI(t)
	mustContain(t, "the gem's metadata", string(spec), "ruby_abi: "+abi)

	out, err := cmd(env, filepath.Join(home, "bin", "ruvoy"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy --version: %v %s", err, out)
	}
	mustContain(t, "--version", string(out), "built for Ruby ABI "+abi)

	port := freePort(t)
	hello, _ := filepath.Abs("../examples/hello/config.ru")
	s := &server{t: t, addr: "127.0.0.1:" + port, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	s.url = "http://" + s.addr
	s.cmd = cmd(env, filepath.Join(home, "bin", "ruvoy"), "-p", port, hello)
	startCmd(t, s)
	equal(t, "served by the installed gem", s.get(t, "/").body, "hello from ruby "+rubyVersion(t)+"\n")
}

func TestShipGemWithBundler(t *testing.T) {
	_, env := installGem(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Gemfile"), []byte("source \"https://rubygems.org\"\ngem \"rack\"\ngem \"ruvoy\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "config.ru"), []byte(
		"run ->(env) { [200, {}, [\"bundled ruvoy #{Ruvoy::VERSION}, offload here: #{Ruvoy.respond_to?(:offload)}\"]] }\n"), 0o644)
	install := cmd(env, "bundle", "install", "--local")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("bundle install --local: %v\n%s", err, out)
	}
	port := freePort(t)
	s := &server{t: t, addr: "127.0.0.1:" + port, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	s.url = "http://" + s.addr
	s.cmd = cmd(env, "bundle", "exec", "ruvoy", "-p", port, "config.ru")
	s.cmd.Dir = dir
	startCmd(t, s)
	equal(t, "bundle exec ruvoy", s.get(t, "/").body, "bundled ruvoy 0.1.0, offload here: true")

	// Outside the server (a rake task, a console, another server) the
	// gem's stand-ins run an offloaded block where it is called, and take
	// the fork hooks' blocks without running them.
	outside := cmd(env, "bundle", "exec", "ruby", "-e", `require "ruvoy"
Ruvoy.before_fork { raise "ran" }
Ruvoy.on_worker_boot { |index| raise "ran" }
Ruvoy.on_worker_shutdown { raise "ran" }
print Ruvoy.offload { "offloaded here" }`)
	outside.Dir = dir
	out, err := outside.CombinedOutput()
	if err != nil {
		t.Fatalf("ruvoy's stand-ins outside the server: %v\n%s", err, out)
	}
	equal(t, "outside the server", string(out), "offloaded here")
}

// The launcher explains a wrong Ruby or a missing libruby instead of
// leaving it to the dynamic loader.
func TestShipGemLauncherMessages(t *testing.T) {
	home, env := installGem(t)
	launchers, _ := filepath.Glob(filepath.Join(home, "gems", "ruvoy-*", "exe", "ruvoy"))
	if len(launchers) != 1 {
		t.Fatalf("no launcher in %s", home)
	}
	run := func(patch string) string {
		out, err := cmd(env, "ruby", "-rrbconfig", "-e", patch+"; load ARGV[0]", launchers[0], "--version").CombinedOutput()
		if err == nil {
			t.Fatalf("the launcher ran despite %s:\n%s", patch, out)
		}
		return string(out)
	}
	mustContain(t, "a wrong ABI", run(`RbConfig::CONFIG["ruby_version"] = "9.9.0"`),
		"ruvoy: this ruvoy was built for Ruby "+rubyABI(t))
	mustContain(t, "no libruby", run(`RbConfig::CONFIG["LIBRUBY_SONAME"] = "libruby-missing.so.9"`),
		"libruby-missing.so.9 is missing")
	mustContain(t, "a static libruby", run(`RbConfig::CONFIG["ENABLE_SHARED"] = "no"`),
		"was built without a shared libruby, which ruvoy embeds")
}

// rubyABI is this Ruby's ABI version (RbConfig's ruby_version: 3.1.0, 3.3.0).
func rubyABI(t testing.TB) string {
	out, err := exec.Command("ruby", "-e", `print RbConfig::CONFIG["ruby_version"]`).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func cmd(env []string, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), env...)
	return c
}
