package ruvoycaddy

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
//	    max_requests    <n>
//	    queue_timeout   <duration>
//	    stall_warn      <duration>
//	    max_inflight_body_size <size>
//	    max_body_size   <size>
//	    request_window  <size>
//	    response_window <size>
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
		case "max_requests":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n <= 0 {
				return d.Errf("max_requests: want a positive integer, got %q", d.Val())
			}
			h.MaxRequests = n
		case "queue_timeout", "stall_warn":
			option := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("%s: %v", option, err)
			}
			if option == "queue_timeout" {
				h.QueueTimeout = caddy.Duration(dur)
			} else {
				v := caddy.Duration(dur)
				h.StallWarn = &v
			}
		case "max_body_size", "request_window", "response_window", "max_inflight_body_size":
			option := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil {
				return d.Errf("%s: %v", option, err)
			}
			switch option {
			case "max_body_size":
				h.MaxBodyBytes = int64(n)
			case "request_window":
				h.RequestWindow = int64(n)
			case "max_inflight_body_size":
				h.MaxInflightBodyBytes = int64(n)
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

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return &handler, err
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
