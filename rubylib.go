package ruvoy

import (
	"embed"
	"strings"
)

// The Ruby half of the runtime, evaluated in the VM at boot, in this order.
//
//go:embed lib/ruvoy/*.rb
var rubyFiles embed.FS

var rubyLoadOrder = []string{
	"version.rb", "errors.rb", "app_loader.rb", "input.rb", "stream_io.rb",
	"scheduler.rb", "signals.rb", "offload.rb", "context.rb", "upstream.rb",
	"rails_support.rb", "rack_timeout.rb",
}

// rubyLibrary packs the files as "name\0source\0" records for rv_start.
func rubyLibrary() string {
	var b strings.Builder
	for _, name := range rubyLoadOrder {
		src, err := rubyFiles.ReadFile("lib/ruvoy/" + name)
		if err != nil {
			panic(err) // the embed pattern above guarantees the files
		}
		b.WriteString("<ruvoy>/" + name)
		b.WriteByte(0)
		b.Write(src)
		b.WriteByte(0)
	}
	return b.String()
}
