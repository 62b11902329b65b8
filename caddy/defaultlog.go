package ruvoycaddy

import (
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

func init() {
	caddy.RegisterModule(DefaultLog{})
}

// caddyFarewell is what Caddy's unnamed logger says as a stop begins.
const caddyFarewell = "exiting; byeee!! 👋"

// DefaultLog is the log format caddy.logging.encoders.ruvoy_default, the
// server's log under `ruvoy config.ru`: Caddy's default (text when stderr
// is a terminal, JSON lines otherwise) without Caddy's farewell, whose
// place ruvoy's own line about the stop takes (the runtime's Stopped).
type DefaultLog struct {
	zapcore.Encoder `json:"-"`
}

var emptyBuffers = buffer.NewPool()

// CaddyModule returns the Caddy module information.
func (DefaultLog) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.ruvoy_default",
		New: func() caddy.Module { return new(DefaultLog) },
	}
}

// Provision starts as JSON; ConfigureDefaultFormat may choose text.
func (e *DefaultLog) Provision(caddy.Context) error {
	e.Encoder = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return nil
}

// ConfigureDefaultFormat chooses as Caddy does for a log with no format:
// to stdout or stderr while stderr is a terminal, text.
func (e *DefaultLog) ConfigureDefaultFormat(wo caddy.WriterOpener) error {
	if caddy.IsWriterStandardStream(wo) && term.IsTerminal(int(os.Stderr.Fd())) {
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = func(ts time.Time, enc zapcore.PrimitiveArrayEncoder) {
			enc.AppendString(ts.UTC().Format("2006/01/02 15:04:05.000"))
		}
		if os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "xterm-mono" {
			cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		e.Encoder = zapcore.NewConsoleEncoder(cfg)
	}
	return nil
}

// Clone is part of zapcore.Encoder.
func (e DefaultLog) Clone() zapcore.Encoder { return DefaultLog{e.Encoder.Clone()} }

// EncodeEntry writes an entry as Caddy's default would, and Caddy's
// farewell as nothing.
func (e DefaultLog) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	if ent.LoggerName == "" && ent.Message == caddyFarewell {
		return emptyBuffers.Get(), nil
	}
	return e.Encoder.EncodeEntry(ent, fields)
}

// Interface guards
var (
	_ zapcore.Encoder                  = DefaultLog{}
	_ caddy.Provisioner                = (*DefaultLog)(nil)
	_ caddy.ConfiguresFormatterDefault = (*DefaultLog)(nil)
)
