// Package lib is the runtime's Ruby side (lib/ruvoy), embedded in the
// binary and evaluated in the VM at boot, and the version it declares:
// ruvoy's one version, which the gem reads from the same file.
package lib

import (
	"embed"
	"regexp"
)

//go:embed ruvoy/*.rb
var files embed.FS

// loadOrder is the order the VM evaluates the files in.
var loadOrder = []string{
	"version.rb", "errors.rb", "app_loader.rb", "input.rb", "stream_io.rb",
	"scheduler.rb", "signals.rb", "offload.rb", "context.rb", "upstream.rb",
	"rails_support.rb", "rack_timeout.rb", "early_hints.rb", "hijack.rb", "hooks.rb",
}

// Ruby lists the files as name, source, name, source...
func Ruby() []string {
	var lib []string
	for _, name := range loadOrder {
		lib = append(lib, "<ruvoy>/"+name, string(read(name)))
	}
	return lib
}

// Version is ruvoy's version, as lib/ruvoy/version.rb declares it.
var Version = string(regexp.MustCompile(`VERSION = "([^"]+)"`).FindSubmatch(read("version.rb"))[1])

func read(name string) []byte {
	src, err := files.ReadFile("ruvoy/" + name)
	if err != nil {
		panic(err) // the embed pattern above guarantees the files
	}
	return src
}
