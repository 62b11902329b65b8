package ruvoycaddy

import (
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(QueryFilter{})
}

// QueryFilter is the log field filter
// caddy.logging.encoders.filter.ruvoy_query: in a URI, the value of every
// query parameter whose name contains one of Names (case-insensitively, as
// Rails' filter_parameters match) becomes [FILTERED]. `ruvoy --access-log`
// applies it to request>uri. Caddy's own query filter matches whole names
// only, so it would log user[password].
type QueryFilter struct {
	Names []string `json:"names,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (QueryFilter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.filter.ruvoy_query",
		New: func() caddy.Module { return new(QueryFilter) },
	}
}

// Filter filters the field's URI.
func (f QueryFilter) Filter(in zapcore.Field) zapcore.Field {
	in.String = f.uri(in.String)
	return in
}

// uri keeps the URI as the client wrote it but for the filtered values.
func (f QueryFilter) uri(s string) string {
	path, query, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		raw, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(raw)
		if err != nil {
			name = raw
		}
		if f.matches(name) {
			params[i] = raw + "=[FILTERED]"
		}
	}
	s = path + "?" + strings.Join(params, "&")
	if hasFragment {
		s += "#" + fragment
	}
	return s
}

func (f QueryFilter) matches(name string) bool {
	name = strings.ToLower(name)
	for _, n := range f.Names {
		if n != "" && strings.Contains(name, strings.ToLower(n)) {
			return true
		}
	}
	return false
}
