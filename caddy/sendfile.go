package ruvoycaddy

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ruvoy/ruvoy/internal/conn"
	"github.com/ruvoy/ruvoy/internal/serve"
)

func init() {
	caddy.RegisterModule(new(Sendfile))
}

// Sendfile lets the handlers after it send files with sendfile(2): under
// Caddy's write idle timeout, file_server's copy of a file is otherwise
// made through a buffer (internal/conn's SendfileWriter says why). ruvoy's --static
// route puts it before file_server. It also tells the runtime of each
// file it sends: work the app's requests do not count (serve.Runtime's
// OtherWork).
type Sendfile struct {
	rt    *serve.Runtime
	piece int64 // the server's write chunk (serverWriteChunk)
}

// CaddyModule returns the Caddy module information.
func (*Sendfile) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.ruvoy_sendfile",
		New: func() caddy.Module { return new(Sendfile) },
	}
}

// Provision finds the process's runtime, if it started, and the server's
// write chunk.
func (s *Sendfile) Provision(ctx caddy.Context) error {
	s.rt = serve.Current()
	s.piece = serverWriteChunk(ctx)
	return nil
}

// ServeHTTP hands the next handler a writer that keeps sendfile.
func (s *Sendfile) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if s.rt != nil {
		s.rt.OtherWork()
	}
	return next.ServeHTTP(conn.SendfileWriter(w, s.piece), r)
}

var (
	_ caddyhttp.MiddlewareHandler = (*Sendfile)(nil)
	_ caddy.Provisioner           = (*Sendfile)(nil)
)
