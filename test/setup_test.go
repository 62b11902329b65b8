package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// On a fresh machine `make serve` sets up first, before Ruby is there to
// ask for the build's flags: setting up says nothing of a missing ruby
// (the Makefile's own recipe, with a stand-in for the packages' script).
func TestConventionsMakeSetupQuiet(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	for _, f := range []string{"Makefile", "build/rbconfig.sh"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o755)
	}
	os.WriteFile(filepath.Join(dir, "build", "setup-debian.sh"), []byte("#!/bin/sh\necho set up \"$@\"\n"), 0o755)
	for _, target := range []string{"setup", "setup-test"} {
		c := exec.Command("make", "--no-print-directory", target)
		c.Dir = dir
		c.Env = append(os.Environ(), "RUBY=/nonexistent/ruby") // build/rbconfig.sh's ruby
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
		want := map[string]string{"setup": "set up\n", "setup-test": "set up test\n"}[target]
		equal(t, "make "+target, string(out), want)
	}
}
