package ruvoycaddy

import (
	"encoding/json"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"

	"github.com/ruvoy/ruvoy/internal/settings"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("ruvoy", parseCaddyfile)
	// Like reverse_proxy, ruvoy answers every request it gets.
	httpcaddyfile.RegisterDirectiveOrder("ruvoy", httpcaddyfile.After, "reverse_proxy")
}

// UnmarshalCaddyfile reads the directive below. As for every Caddy
// directive, a first argument starting with "/" is a path matcher: write an
// absolute rackup path after a matcher (`ruvoy * /srv/app/config.ru`) or in
// the block.
//
//	ruvoy [<matcher>] [<rackup>] {
//	    <key> <value...>
//	    context  { ... }
//	    upstream { ... }
//	}
//
// A key is a handler setting's JSON field (settings.Table), its value as
// the setting's reader takes it; docs/configuration.md lists them.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		h.Rackup = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	given := settings.Values{}
	for d.NextBlock(0) {
		if err := h.readKey(d, given); err != nil {
			return err
		}
	}
	return given.Decode(h)
}

// readKey reads a line of the directive's block into given, or a block of
// its own (context, upstream) into h.
func (h *Handler) readKey(d *caddyfile.Dispenser, given settings.Values) error {
	key, err := renamedKey(d, "")
	if err != nil {
		return err
	}
	s := settings.ByJSON(key)
	if s == nil {
		return d.Errf("unknown ruvoy option %q", d.Val())
	}
	switch {
	case key == "context":
		return h.parseContext(d)
	case key == "upstream":
		return h.parseUpstream(d)
	case s.Read.Block:
		return d.Errf("ruvoy option %q: its block has no reader", key) // a table entry without its parse below
	}
	args := d.RemainingArgs()
	if s.Read.Switch != (len(args) == 0) || (len(args) > 1 && !s.Read.Adds) {
		return d.ArgErr()
	}
	if s.Read.Switch {
		args = []string{""}
	}
	for _, arg := range args {
		v, err := s.ReadCaddyfile(arg)
		if err != nil {
			return d.WrapErr(err)
		}
		given.Add(s, v)
	}
	return nil
}

// renamedKey is the key at d, or the name it has now when it is a former
// one (settings.Renames), which is warned of, or refused with its new
// name; block is the block it is in ("upstream"), or "".
func renamedKey(d *caddyfile.Dispenser, block string) (string, error) {
	key := d.Val()
	path := key
	if block != "" {
		path = block + "." + key
	}
	r, ok := settings.Renamed(settings.InCaddyfile, path)
	switch {
	case !ok:
		return key, nil
	case r.Refused:
		return "", d.Err(r.Message())
	}
	caddy.Log().Warn("ruvoy: " + r.Message())
	return strings.TrimPrefix(r.New, block+"."), nil
}

// parseContext reads:
//
//	context {
//	    metadata_namespaces <namespace...>
//	    route_name          <name>
//	    route_metadata      <namespace> <key> <value>
//	}
func (h *Handler) parseContext(d *caddyfile.Dispenser) error {
	c := &ContextConfig{}
	h.Context = c
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "metadata_namespaces":
			c.MetadataNamespaces = append(c.MetadataNamespaces, d.RemainingArgs()...)
		case "route_name":
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.RouteName = d.Val()
		case "route_metadata":
			args := d.RemainingArgs()
			if len(args) != 3 {
				return d.Errf("route_metadata: want <namespace> <key> <value>")
			}
			if c.RouteMetadata == nil {
				c.RouteMetadata = map[string]map[string]any{}
			}
			if c.RouteMetadata[args[0]] == nil {
				c.RouteMetadata[args[0]] = map[string]any{}
			}
			c.RouteMetadata[args[0]][args[1]] = args[2]
		default:
			return d.Errf("unknown context option %q", d.Val())
		}
	}
	return nil
}

// parseUpstream reads:
//
//	upstream {
//	    upstreams          <name...>
//	    timeout            <duration>
//	    max_response_bytes <size>
//	}
func (h *Handler) parseUpstream(d *caddyfile.Dispenser) error {
	u := &UpstreamConfig{}
	h.Upstream = u
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key, err := renamedKey(d, "upstream")
		if err != nil {
			return err
		}
		switch key {
		case "upstreams":
			u.Upstreams = append(u.Upstreams, d.RemainingArgs()...)
		case "timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("timeout: %v", err)
			}
			u.TimeoutMS = int(dur.Milliseconds())
		case "max_response_bytes":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil {
				return d.Errf("max_response_bytes: %v", err)
			}
			u.MaxResponseBytes = int64(n)
		default:
			return d.Errf("unknown upstream option %q", d.Val())
		}
	}
	return nil
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return &handler, err
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)

func init() {
	httpcaddyfile.RegisterGlobalOption("ruvoy_upstream", parseUpstreamOption)
	// What ruvoy_upstream was called before: the same, warned of.
	for _, r := range settings.RenamedIn(settings.InCaddyfileOption) {
		if r.New == "ruvoy_upstream" {
			httpcaddyfile.RegisterGlobalOption(r.Old, parseUpstreamOption)
		}
	}
}

// parseUpstreamOption reads an upstream an app may call, as a global
// option:
//
//	ruvoy_upstream <name> <hosts...> {
//	    <reverse_proxy subdirectives: lb_policy, health_uri, transport, ...>
//	}
//
// Every ruvoy_upstream lands in the "ruvoy" app's upstreams.
func parseUpstreamOption(d *caddyfile.Dispenser, existing any) (any, error) {
	upstreams := Upstreams{Upstreams: map[string]json.RawMessage{}}
	if app, ok := existing.(httpcaddyfile.App); ok {
		if err := json.Unmarshal(app.Value, &upstreams); err != nil {
			return nil, err
		}
	}
	d.Next() // the option name
	if r, ok := settings.Renamed(settings.InCaddyfileOption, d.Val()); ok {
		caddy.Log().Warn("ruvoy: " + r.Message())
	}
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	name := d.Val()
	if _, dup := upstreams.Upstreams[name]; dup {
		return nil, d.Errf("upstream %q is defined twice", name)
	}
	// From the name on, it is a reverse_proxy directive: parse it as one.
	segment := d.NextSegment()
	segment[0].Text = "reverse_proxy"
	proxy := new(reverseproxy.Handler)
	if err := proxy.UnmarshalCaddyfile(caddyfile.NewDispenser(segment)); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(proxy)
	if err != nil {
		return nil, err
	}
	upstreams.Upstreams[name] = raw
	value, err := json.Marshal(upstreams)
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "ruvoy", Value: value}, nil
}
