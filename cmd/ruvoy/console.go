package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// The console is where `ruvoy config.ru` says that it serves and how it
// stopped, on stdout, as Puma does (its banner, "Gracefully stopping",
// "Goodbye!"); warnings and errors go to the log, on stderr. It is text
// when the log is (Caddy writes its log as text when stderr is a
// terminal, JSON lines otherwise), so a person at a terminal reads lines
// like Puma's and a log collector gets JSON from both streams.
type console struct {
	text bool
	out  io.Writer
	log  *zap.Logger // the console's lines, as text or JSON
}

// newConsole writes to out, as text when stderr is a terminal.
func newConsole(out io.Writer) *console {
	return newConsoleAs(out, term.IsTerminal(int(os.Stderr.Fd())))
}

func newConsoleAs(out io.Writer, text bool) *console {
	c := &console{text: text, out: out}
	sink := zapcore.Lock(zapcore.AddSync(out))
	if text {
		c.log = zap.New(textCore{zapcore.NewCore(zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg"}), sink, zap.DebugLevel)})
	} else {
		// The fields Caddy's JSON log has: level, ts, logger, msg.
		c.log = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), sink, zap.DebugLevel)).Named("ruvoy")
	}
	return c
}

// textCore writes the message alone: on the console the message says it
// all, and the fields are for the JSON lines.
type textCore struct{ zapcore.Core }

func (c textCore) With([]zapcore.Field) zapcore.Core { return c }

func (c textCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c textCore) Write(e zapcore.Entry, _ []zapcore.Field) error { return c.Core.Write(e, nil) }

// banner is what the console says once the server serves.
type banner struct {
	version, ruby, caddy string
	rackup, url          string // url: the first address, or the --domain's
	environment          string
	pid, workers         int
	preload              bool
	listeners            []string // each address served, as a URL, perhaps with its protocols
}

// serving says the server serves: on a terminal in Puma's layout, ending
// with how to stop it; as JSON one line with the same facts.
func (c *console) serving(b banner) {
	// ": serving " is the line's mark, which scripts and the tests wait for.
	head := fmt.Sprintf("ruvoy %s (ruby %s, caddy %s): serving %s", b.version, b.ruby, b.caddy, b.rackup)
	if !c.text {
		c.log.Info(head+" on "+b.url,
			zap.String("version", b.version), zap.String("ruby", b.ruby), zap.String("caddy", b.caddy),
			zap.String("rackup", b.rackup), zap.String("environment", b.environment), zap.Int("pid", b.pid),
			zap.Int("workers", b.workers), zap.Bool("preload", b.preload), zap.Strings("listen", b.listeners))
		return
	}
	var s strings.Builder
	fmt.Fprintln(&s, head)
	fmt.Fprintf(&s, "*  Environment: %s\n", b.environment)
	if b.workers > 0 {
		fmt.Fprintf(&s, "*   Master PID: %d\n", b.pid)
		preloaded := ""
		if b.preload {
			preloaded = ", forked from the app booted once (--preload)"
		}
		fmt.Fprintf(&s, "*      Workers: %d%s\n", b.workers, preloaded)
	} else {
		fmt.Fprintf(&s, "*          PID: %d\n", b.pid)
	}
	for _, l := range b.listeners {
		fmt.Fprintf(&s, "* Listening on %s\n", l)
	}
	fmt.Fprintln(&s, "Use Ctrl-C to stop")
	io.WriteString(c.out, s.String())
}
