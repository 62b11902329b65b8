package ruvoycaddy

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"
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
//	    environment   <name>
//	    workers         <n>|auto
//	    worker_max_rss_bytes <size>
//	    worker_timeout  <duration>
//	    preload
//	    max_requests    <n>
//	    max_requests_per_connection <n>
//	    max_requests_per_client <n>
//	    queue_timeout   <duration>
//	    request_timeout <duration>
//	    hold_warn       <duration>
//	    vm_hold_limit   <duration>
//	    max_inflight_body_bytes <size>
//	    max_body_bytes  <size>
//	    request_window  <size>
//	    response_window <size>
//	    sendfile_dirs   <dir...>
//	    early_hints_http1
//	    context  { ... }
//	    upstream { ... }
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		h.Rackup = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "rackup":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.Rackup = d.Val()
		case "environment":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.Environment = d.Val()
		case "sendfile_dirs":
			h.SendfileDirs = append(h.SendfileDirs, d.RemainingArgs()...)
			if len(h.SendfileDirs) == 0 {
				return d.ArgErr()
			}
			continue
		case "preload":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Preload = true
		case "early_hints_http1":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.EarlyHintsHTTP1 = true
		case "context":
			if err := h.parseContext(d); err != nil {
				return err
			}
			continue
		case "upstream":
			if err := h.parseUpstream(d); err != nil {
				return err
			}
			continue
		case "workers":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if d.Val() == "auto" {
				n, err = runtime.NumCPU(), nil
			}
			if err != nil || n < 0 || n > 256 {
				return d.Errf("workers: want a number from 0 to 256, or auto, got %q", d.Val())
			}
			h.Workers = n
		case "max_requests", "max_requests_per_connection", "max_requests_per_client":
			option := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n <= 0 {
				return d.Errf("%s: want a positive integer, got %q", option, d.Val())
			}
			switch option {
			case "max_requests":
				h.MaxRequests = n
			case "max_requests_per_connection":
				h.MaxRequestsPerConn = n
			default:
				h.MaxRequestsPerClient = n
			}
		case "queue_timeout", "hold_warn", "stall_warn", "request_timeout", "vm_hold_limit", "worker_timeout":
			option := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("%s: %v", option, err)
			}
			switch option {
			case "queue_timeout":
				h.QueueTimeout = caddy.Duration(dur)
			case "request_timeout":
				h.RequestTimeout = caddy.Duration(dur)
			case "vm_hold_limit":
				v := caddy.Duration(dur)
				h.VMHoldLimit = &v
			case "worker_timeout":
				h.WorkerTimeout = caddy.Duration(dur)
			default:
				v := caddy.Duration(dur)
				if option == "stall_warn" { // its former name, warned of at Provision
					h.StallWarn = &v
				} else {
					h.HoldWarn = &v
				}
			}
		case "max_body_size", "max_inflight_body_size":
			// One name per setting, as in the JSON config and the flags.
			return d.Errf("%s is now called %s_bytes", d.Val(), strings.TrimSuffix(d.Val(), "_size"))
		case "max_body_bytes", "request_window", "response_window", "max_inflight_body_bytes", "worker_max_rss_bytes":
			option := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil {
				return d.Errf("%s: %v", option, err)
			}
			switch option {
			case "max_body_bytes":
				h.MaxBodyBytes = int64(n)
			case "request_window":
				h.RequestWindow = int64(n)
			case "max_inflight_body_bytes":
				h.MaxInflightBodyBytes = int64(n)
			case "worker_max_rss_bytes":
				h.WorkerMaxRSSBytes = int64(n)
			default:
				h.ResponseWindow = int64(n)
			}
		default:
			return d.Errf("unknown ruvoy option %q", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
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
//
// (clusters: what upstreams was called before, still read.)
func (h *Handler) parseUpstream(d *caddyfile.Dispenser) error {
	u := &UpstreamConfig{}
	h.Upstream = u
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "upstreams":
			u.Upstreams = append(u.Upstreams, d.RemainingArgs()...)
		case "clusters":
			u.Clusters = append(u.Clusters, d.RemainingArgs()...) // warned of at Provision
		case "timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("timeout: %v", err)
			}
			u.TimeoutMS = int(dur.Milliseconds())
		case "max_response_size":
			return d.Errf("max_response_size is now called max_response_bytes")
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
	httpcaddyfile.RegisterGlobalOption("ruvoy_cluster", parseUpstreamOption)
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
	if d.Val() == "ruvoy_cluster" {
		caddy.Log().Warn("ruvoy: the Caddyfile option ruvoy_cluster is deprecated: it is now ruvoy_upstream")
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
