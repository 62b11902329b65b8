package wire

// VMConfig is what a VM boots with: in a process with Go (internal/vm's
// Start, which hands it to rv_start as vm.h's rv_config) and in a
// template (TemplateSettings).
type VMConfig struct {
	Program    string   // $0
	Args       []string // ARGV
	RubyLib    []string // the embedded Ruby library: name, source, name, source...
	MaxStreams uint32   // streams the VM keeps room for: the admission limit
	Window     uint64   // response bytes in flight per stream
}

// TemplateSettings is what a template process boots (wire.h,
// "Templates"): the VM's settings and the app it loads.
type TemplateSettings struct {
	VMConfig
	Rackup, Environment, Upstreams string
}

// AppendTemplateSettings appends a TemplateSettings payload.
func AppendTemplateSettings(b []byte, s TemplateSettings) []byte {
	b = AppendString(b, s.Program)
	b = AppendString(b, joinNUL(s.Args))
	b = AppendString(b, joinNUL(s.RubyLib))
	b = AppendString(b, AppendLoadApp(nil, s.Rackup, s.Environment, s.Upstreams))
	b = order.AppendUint32(b, uint32(len(s.Args)))
	b = order.AppendUint32(b, s.MaxStreams)
	return order.AppendUint64(b, s.Window)
}

// joinNUL ends each string with a NUL.
func joinNUL(list []string) []byte {
	var b []byte
	for _, s := range list {
		b = append(append(b, s...), 0)
	}
	return b
}
