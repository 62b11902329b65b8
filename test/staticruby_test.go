package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// staticRuby is a Ruby built as ruby-build builds one by default, with a
// static libruby (no --enable-shared): build/ruby-yjit.sh installs one in
// /opt/ruby-static in the trixie-yjit root, where make test-yjit runs
// this test; RUVOY_STATIC_RUBY names another.
func staticRuby() string {
	if r := os.Getenv("RUVOY_STATIC_RUBY"); r != "" {
		return r
	}
	return "/opt/ruby-static/bin/ruby"
}

// A Ruby without a shared libruby cannot be embedded: `make` says so and
// what to do, and stops before Go's linker (no wall of undefined symbols),
// and the gem's ruvoy command says the same instead of the dynamic
// loader's error. Checked against a real static Ruby, beside the same
// steps passing on the shared one.
func TestStaticRubyRefused(t *testing.T) {
	ruby := staticRuby()
	_, err := os.Stat(ruby)
	need(t, err == nil, "a Ruby with a static libruby at "+ruby+" (the trixie-yjit root has one: make test-yjit)")
	shared, err := exec.Command(ruby, "-e", `print RbConfig::CONFIG["ENABLE_SHARED"]`).Output()
	if err != nil {
		t.Fatalf("%s: %v", ruby, err)
	}
	equal(t, ruby+"'s ENABLE_SHARED", string(shared), "no")
	path := "PATH=" + filepath.Dir(ruby) + ":" + os.Getenv("PATH")

	// The build: `make` with that Ruby first on PATH, as rbenv's shims put it.
	before, err := os.Stat("../ruvoy")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd([]string{path}, "make", "-C", "..", "-B", "ruvoy").CombinedOutput()
	if err == nil {
		t.Fatalf("make ruvoy with a static Ruby succeeded:\n%s", out)
	}
	mustContain(t, "make ruvoy's output", string(out), "was built without a shared libruby, which ruvoy embeds")
	mustContain(t, "make ruvoy's output", string(out), "RUBY_CONFIGURE_OPTS=--enable-shared")
	if strings.Contains(string(out), "undefined reference") {
		t.Errorf("make ruvoy went on to link against no libruby:\n%s", out)
	}
	if after, err := os.Stat("../ruvoy"); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("make ruvoy with a static Ruby touched ../ruvoy: %v", err)
	}

	// The gem's command, as installed for that Ruby's ABI: a gem made for
	// this version and platform elsewhere (a shared Ruby of the same
	// build) and installed into the static one.
	launcher := func(ruby string) (string, error) {
		dir := t.TempDir()
		for _, d := range []string{"exe", "libexec"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		src, err := os.ReadFile("../gem/exe/ruvoy")
		if err != nil {
			t.Fatal(err)
		}
		abi, err := exec.Command(ruby, "-e", `c = RbConfig::CONFIG; print [c["ruby_version"], Gem::Platform.local, c["arch"]].join(" ")`).Output()
		if err != nil {
			t.Fatalf("%s: %v", ruby, err)
		}
		files := map[string]string{"exe/ruvoy": string(src), "libexec/RUBY_ABI": string(abi) + "\n",
			"libexec/ruvoy": "#!/bin/sh\necho \"the binary ran: $*\"\n"}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(ruby, filepath.Join(dir, "exe/ruvoy"), "--version").CombinedOutput()
		return string(out), err
	}
	out2, err := launcher(ruby)
	if err == nil {
		t.Fatalf("the gem's ruvoy ran on a static Ruby:\n%s", out2)
	}
	mustContain(t, "the gem's ruvoy on a static Ruby", out2, "was built without a shared libruby, which ruvoy embeds")
	mustContain(t, "the gem's ruvoy on a static Ruby", out2, "RUBY_CONFIGURE_OPTS=--enable-shared")
	// The same launcher on this machine's shared Ruby runs the binary.
	out3, err := launcher("ruby")
	if err != nil || !strings.Contains(out3, "the binary ran: --version") {
		t.Errorf("the gem's ruvoy on the shared Ruby: %v\n%s", err, out3)
	}
}
