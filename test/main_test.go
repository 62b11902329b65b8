package test

import (
	"os"
	"testing"
)

// TestMain removes what tests built once for the whole run (the blocking
// extension), so that a run leaves nothing in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if extDir != "" {
		os.RemoveAll(extDir)
	}
	os.Exit(code)
}
