package ruvoycaddy

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(CommonLog{})
}

// CommonLog is the log format caddy.logging.encoders.ruvoy_common: an
// access log entry as one line of the common log format, as
// Rack::CommonLogger writes it under rackup (and so Puma's console in
// development):
//
//	127.0.0.1 - - [04/Dec/2026:18:51:56 +0000] "GET /x?y=1 HTTP/1.1" 200 22 0.0007
//
// the client (after trusted proxies), the user basic_auth let in, the time
// the answer ended, the request line, the status, the body's bytes sent
// ("-" for none; Rack::CommonLogger writes the Content-Length the app
// set) and the seconds it took. In a Caddyfile: log { format
// ruvoy_common }. Entries that are not an access log's write their message.
type CommonLog struct {
	// The fields given before the entry (a logger's With, the filter
	// encoder's filtered fields), as values.
	*fieldMap `json:"-"`
}

// CaddyModule returns the Caddy module information.
func (CommonLog) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.ruvoy_common",
		New: func() caddy.Module { return &CommonLog{newFieldMap()} },
	}
}

// UnmarshalCaddyfile reads `format ruvoy_common`, which takes no options.
func (*CommonLog) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Clone is part of zapcore.Encoder.
func (e CommonLog) Clone() zapcore.Encoder { return CommonLog{e.clone()} }

var commonBuffers = buffer.NewPool()

// EncodeEntry writes the entry's line.
func (e CommonLog) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	all := e.clone()
	for _, f := range fields {
		f.AddTo(all)
	}
	buf := commonBuffers.Get()
	req, ok := all.top["request"].(map[string]any)
	if !ok {
		buf.AppendString(printable(ent.Message))
		buf.AppendByte('\n')
		return buf, nil
	}
	str := func(m map[string]any, key string) string {
		if s, _ := m[key].(string); s != "" {
			return s
		}
		return "-"
	}
	client := str(req, "client_ip")
	if client == "-" {
		client = str(req, "remote_ip")
	}
	size := "-"
	if n := intField(all.top["size"]); n > 0 {
		size = strconv.FormatInt(n, 10)
	}
	took, _ := all.top["duration"].(time.Duration)
	line := fmt.Sprintf("%s - %s [%s] \"%s %s %s\" %d %s %.4f", client, str(all.top, "user_id"),
		ent.Time.Format("02/Jan/2006:15:04:05 -0700"), str(req, "method"), str(req, "uri"), str(req, "proto"),
		intField(all.top["status"]), size, took.Seconds())
	buf.AppendString(printable(line))
	buf.AppendByte('\n')
	return buf, nil
}

// intField reads a number zap's map encoder kept.
func intField(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case uint64:
		return int64(n)
	}
	return 0
}

// fieldMap keeps a log entry's fields as values, nested as they were
// given: an object's fields land in its own map, whether its marshaler
// writes to the encoder it is handed or, as the filter encoder's does, to
// the encoder that wraps this one (and so to this one again).
type fieldMap struct {
	top, cur map[string]any
}

func newFieldMap() *fieldMap {
	m := map[string]any{}
	return &fieldMap{top: m, cur: m}
}

// clone is a copy to add more fields to (those given so far are not
// changed after: a shallow copy).
func (m *fieldMap) clone() *fieldMap {
	c := newFieldMap()
	if m != nil {
		maps.Copy(c.top, m.top)
	}
	return c
}

func (m *fieldMap) AddObject(k string, v zapcore.ObjectMarshaler) error {
	nested := map[string]any{}
	m.cur[k] = nested
	outer := m.cur
	m.cur = nested
	err := v.MarshalLogObject(m)
	m.cur = outer
	return err
}

// AddArray keeps no array's items: the line has none.
func (m *fieldMap) AddArray(k string, _ zapcore.ArrayMarshaler) error { m.cur[k] = nil; return nil }
func (m *fieldMap) OpenNamespace(k string) {
	ns := map[string]any{}
	m.cur[k] = ns
	m.cur = ns
}
func (m *fieldMap) AddBinary(k string, v []byte)          { m.cur[k] = string(v) }
func (m *fieldMap) AddByteString(k string, v []byte)      { m.cur[k] = string(v) }
func (m *fieldMap) AddBool(k string, v bool)              { m.cur[k] = v }
func (m *fieldMap) AddComplex128(k string, v complex128)  { m.cur[k] = v }
func (m *fieldMap) AddComplex64(k string, v complex64)    { m.cur[k] = v }
func (m *fieldMap) AddDuration(k string, v time.Duration) { m.cur[k] = v }
func (m *fieldMap) AddFloat64(k string, v float64)        { m.cur[k] = v }
func (m *fieldMap) AddFloat32(k string, v float32)        { m.cur[k] = v }
func (m *fieldMap) AddInt(k string, v int)                { m.cur[k] = int64(v) }
func (m *fieldMap) AddInt64(k string, v int64)            { m.cur[k] = v }
func (m *fieldMap) AddInt32(k string, v int32)            { m.cur[k] = int64(v) }
func (m *fieldMap) AddInt16(k string, v int16)            { m.cur[k] = int64(v) }
func (m *fieldMap) AddInt8(k string, v int8)              { m.cur[k] = int64(v) }
func (m *fieldMap) AddString(k, v string)                 { m.cur[k] = v }
func (m *fieldMap) AddTime(k string, v time.Time)         { m.cur[k] = v }
func (m *fieldMap) AddUint(k string, v uint)              { m.cur[k] = uint64(v) }
func (m *fieldMap) AddUint64(k string, v uint64)          { m.cur[k] = v }
func (m *fieldMap) AddUint32(k string, v uint32)          { m.cur[k] = uint64(v) }
func (m *fieldMap) AddUint16(k string, v uint16)          { m.cur[k] = uint64(v) }
func (m *fieldMap) AddUint8(k string, v uint8)            { m.cur[k] = uint64(v) }
func (m *fieldMap) AddUintptr(k string, v uintptr)        { m.cur[k] = uint64(v) }
func (m *fieldMap) AddReflected(k string, v any) error    { m.cur[k] = v; return nil }

// printable escapes what is not printable as \xNN, as Rack::CommonLogger
// does: a line of the log is one request, whatever the client sent.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || !unicode.IsPrint(r) {
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, "\\x%x", c)
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Interface guards
var (
	_ zapcore.Encoder       = CommonLog{}
	_ caddyfile.Unmarshaler = (*CommonLog)(nil)
)
