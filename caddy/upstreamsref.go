package ruvoycaddy

import (
	"context"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// upstreamsRef is how a handler reaches the upstreams app ("ruvoy"): it looks
// the app up at the first call, not in the handler's Provision. Loaded from
// there, the app would provision its reverse proxies under the handler's
// context, whose module ancestry Caddy shares between sibling modules: a
// proxy's health checker, which reads it when it reports a host, raced
// with the modules loaded after it (caught by the race detector in the
// docs' configs). Caddy loads every configured app itself, at the top,
// before anything serves.
type upstreamsRef struct {
	ctx    caddy.Context
	wanted []string // the upstreams the handler lets the app call
	once   sync.Once
	app    *Upstreams
}

func (r *upstreamsRef) Call(ctx context.Context, call *serve.UpstreamCall, maxBytes int64) (*serve.UpstreamResponse, error) {
	r.once.Do(r.resolve)
	return r.app.Call(ctx, call, maxBytes)
}

// resolve finds the app, and warns of each wanted upstream it lacks.
func (r *upstreamsRef) resolve() {
	r.app = new(Upstreams) // none defined
	if app, err := r.ctx.AppIfConfigured("ruvoy"); err == nil {
		r.app = app.(*Upstreams)
	}
	for _, name := range r.wanted {
		if r.app.handlers[name] == nil {
			r.ctx.Logger().Warn("the app may call an upstream that is not defined: its calls will fail",
				zap.String("upstream", name))
		}
	}
}

var _ serve.UpstreamCaller = (*upstreamsRef)(nil)
