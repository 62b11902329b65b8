package wire

// TemplateSettings is what a template process boots (wire.h,
// "Templates"): the VM's settings and the app it loads.
type TemplateSettings struct {
	Program                        string
	Args                           []string
	RubyLib                        []string // name, source, name, source...
	Rackup, Environment, Upstreams string
	MaxStreams                     uint32
	Window                         uint64
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
