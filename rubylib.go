package ruvoy

import "embed"

// The Ruby half of the runtime, evaluated in the VM at boot, in this order.
//
//go:embed lib/ruvoy/*.rb
var rubyFiles embed.FS

var rubyLoadOrder = []string{
	"version.rb", "errors.rb", "app_loader.rb", "input.rb", "stream_io.rb",
	"scheduler.rb", "signals.rb", "offload.rb", "context.rb", "upstream.rb",
	"rails_support.rb", "rack_timeout.rb", "early_hints.rb", "hijack.rb", "hooks.rb",
}

// rubyLibrary lists the files as name, source, name, source...
func rubyLibrary() []string {
	var lib []string
	for _, name := range rubyLoadOrder {
		src, err := rubyFiles.ReadFile("lib/ruvoy/" + name)
		if err != nil {
			panic(err) // the embed pattern above guarantees the files
		}
		lib = append(lib, "<ruvoy>/"+name, string(src))
	}
	return lib
}
