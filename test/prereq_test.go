package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// What a test needs from the machine (root, a second CPU, Chromium, a
// kernel setting) is checked with need. Where `make test` runs the suite
// (the Makefile's test target sets CI=1, after its preflight checked the
// same prerequisites, test/preflight), a missing one fails the test: CI
// must not pass on tests it did not run. Elsewhere (a developer's
// `go test` without root, say) the test is skipped, saying why.

// strict says whether a missing prerequisite fails the test (CI set, and
// not to 0 or false).
func strict() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// need fails or skips the test unless ok; what names the prerequisite
// and why the test needs it.
func need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if strict() {
		t.Fatalf("missing prerequisite: %s (CI=%s: make test requires it; test/preflight checks it)", what, os.Getenv("CI"))
	}
	t.Skipf("missing prerequisite: %s (with CI=1, as under make test, this fails)", what)
}

// needRoot is need for root.
func needRoot(t testing.TB, why string) {
	t.Helper()
	need(t, os.Geteuid() == 0, "root: "+why)
}

// skipCall is a call that skips a test, as written in a test file.
var skipCall = regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)

// Every skip goes through need, so that CI cannot pass a test it did not
// run: no other call to Skip in the tests.
func TestPrereqsSkipOnlyThroughNeed(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) < 10 {
		t.Fatalf("the test files: %v, %v", files, err)
	}
	for _, f := range files {
		if f == "prereq_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if skipCall.MatchString(line) {
				t.Errorf("%s:%d: a skip that CI would not see: use need(t, ok, what) (%s)", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
