package lib

import (
	"io/fs"
	"regexp"
	"testing"
)

// Every file of lib/ruvoy is evaluated at boot, once, and the version is
// the one version.rb declares.
func TestRubyLibrary(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(Version) {
		t.Fatalf("Version %q", Version)
	}
	listed := map[string]bool{}
	lib := Ruby()
	for i := 0; i < len(lib); i += 2 {
		listed[lib[i]] = true
	}
	// The gem's Rack handler runs in the Ruby that starts ruvoy (rackup,
	// rails server), never in the VM.
	notInVM := map[string]bool{"ruvoy/rack_handler.rb": true}
	files, _ := fs.Glob(files, "ruvoy/*.rb")
	for _, f := range files {
		if !listed["<ruvoy>/"+f[len("ruvoy/"):]] && !notInVM[f] {
			t.Errorf("%s is not in loadOrder: the VM would never evaluate it", f)
		}
	}
	if len(listed) != len(files)-len(notInVM) {
		t.Errorf("loadOrder names %d files, lib/ruvoy has %d", len(listed), len(files))
	}
}
