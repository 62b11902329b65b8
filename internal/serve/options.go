package serve

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// AppOptions configure one loaded app.
type AppOptions struct {
	MaxRequests int // requests admitted to Ruby at once (default 1024)
	// MaxRequestsPerConnection bounds the requests one HTTP/2 or HTTP/3
	// connection has in Ruby at once; more wait for one of them to end
	// (default: 100, at most a quarter of MaxRequests).
	MaxRequestsPerConnection int
	// MaxRequestsPerClient bounds the requests one client address (an
	// IPv6 one by its /64; ClientIP names it) has in Ruby at once, across
	// its connections; more are refused as over MaxRequests are (default:
	// a quarter of MaxRequests, at least 64; MaxRequests or more: none).
	MaxRequestsPerClient int
	QueueTimeout         time.Duration // how long a request over MaxRequests may wait (default 0)
	MaxBodyBytes         int64         // request bodies over this get 413 (0: no limit)
	// RequestTimeout, when set, bounds the time a request spends in Ruby:
	// past it, Ruvoy::RequestTimeout is raised in its fiber (503).
	RequestTimeout time.Duration
	// MaxInflightBodyBytes bounds request body bytes held in memory across
	// the app's requests (default 64 MiB; -1: no limit).
	MaxInflightBodyBytes int64
	RequestWindow        int64 // request body bytes read ahead of the app (default 256 KiB)
	ResponseWindow       int64 // response bytes in flight per request (default: the runtime's)
	// Context, when set, gives the app env["ruvoy.context"].
	Context *ContextOptions
	// Upstream, when set, gives the app env["ruvoy.upstream"].
	Upstream *UpstreamOptions
	// SendfileDirs are the directories an X-Sendfile or X-Accel-Redirect
	// response header may name a file in; none: the headers pass through.
	SendfileDirs []string
	// Trusted reports whether r came from a trusted proxy: only then do
	// X-Forwarded-* headers reach the app (and X-Forwarded-Proto set
	// rack.url_scheme). nil: never.
	Trusted func(r *http.Request) bool
	// ClientIP names the client for REMOTE_ADDR (Caddy passes its client_ip,
	// which honours trusted proxies); nil uses the connection's address.
	ClientIP func(*http.Request) string
	// ScriptName gives SCRIPT_NAME: where a server in front mounted the
	// app, the part of the path it stripped (Caddy's handle_path).
	ScriptName func(*http.Request) string
	// RemoteUser gives REMOTE_USER: the user a server in front
	// authenticated (Caddy's basic_auth), or "".
	RemoteUser func(*http.Request) string
	// Workers, when above 0, runs the app in that many worker processes
	// (cluster mode, pools.go) instead of this process's VM.
	Workers int
	// AccessLog adds a field to r's access log entry (Caddy's): the
	// worker that serves it (cluster mode), its queue time.
	AccessLog func(r *http.Request, f zap.Field)
	// WorkerMaxRSS replaces a worker whose resident memory grows past it
	// (bytes; 0: never).
	WorkerMaxRSS int64
	// WorkerTimeout is how long a worker may go without reporting before
	// it is killed and its requests get 504 (default 30s).
	WorkerTimeout time.Duration
	// Preload forks the workers from a template process that booted the
	// app once (docs/cluster-memory.md).
	Preload bool
	// WriteTimeout is the server's: a write to the client that does not
	// finish within it fails (Caddy's write_idle_timeout). ruvoy counts and
	// logs the responses it cut (writetimeout.go); 0: none.
	WriteTimeout time.Duration
	// WriteChunk is the size of the pieces the server's writer cuts a copy
	// into so that its write timeout applies between them (Caddy's
	// max_write_chunk); file bodies keep sendfile(2) under it
	// (internal/conn's CopyFile). 0: none.
	WriteChunk int64
	// EarlyHintsHTTP1 sends the app's 103 Early Hints to HTTP/1.1
	// clients too, not only to HTTP/2 and HTTP/3 ones (earlyhints.go).
	EarlyHintsHTTP1 bool
	// GCWhenIdle, when above 0, has the VM run Ruby's GC once no request
	// has been in flight for that long (internal/vm's rv_gc_idle.c): in
	// this process's VM, where the last app loaded sets it, or in the
	// app's workers.
	GCWhenIdle time.Duration
}

const (
	defaultMaxRequests   = 1024
	defaultRequestWindow = 256 << 10
	defaultBodyBudget    = 64 << 20
)

// withDefaults fills in what o leaves unset.
func (o AppOptions) withDefaults() AppOptions {
	if o.MaxRequests <= 0 {
		o.MaxRequests = defaultMaxRequests
	}
	if o.MaxRequestsPerConnection <= 0 {
		o.MaxRequestsPerConnection = max(1, min(defaultPerConn, o.MaxRequests/4))
	}
	if o.MaxRequestsPerClient <= 0 {
		o.MaxRequestsPerClient = min(o.MaxRequests, max(defaultPerClient, o.MaxRequests/4))
	}
	if o.RequestWindow <= 0 {
		o.RequestWindow = defaultRequestWindow
	}
	if o.MaxInflightBodyBytes == 0 {
		o.MaxInflightBodyBytes = defaultBodyBudget
	}
	if u := o.Upstream; u != nil {
		c := *u
		if c.Timeout <= 0 {
			c.Timeout = defaultUpstreamTimeout
		}
		if c.MaxResponseBytes <= 0 {
			c.MaxResponseBytes = defaultUpstreamMaxBytes
		}
		o.Upstream = &c
	}
	return o
}
