package ruvoycaddy

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// AdminGate is the admin port ruvoy serves (--admin-port) in front of
// Caddy's admin API, which then listens on a unix socket only its user may
// open. Caddy's admin API takes no credential: any process on the machine
// could read the config and the command line, load a config (a file
// server rooted at /) or stop the server. Through the gate, what a monitor
// needs is open to local clients (GET or HEAD of /metrics, /ruvoy/ready
// and /ruvoy/health); everything else (/config/, /load, /stop,
// /debug/pprof/, /adapt, /pki/, /id/, /reverse_proxy/upstreams) needs
// "Authorization: Bearer <Token>".
//
// As Caddy's own admin listener does, it answers only requests addressed
// to the loopback by name or number (a web page that rebinds its domain to
// 127.0.0.1 gets 403), and with a token no page can send a request the
// browser did not let it add a header to.
type AdminGate struct {
	Token  string // compared in constant time
	Socket string // the unix socket Caddy's admin API listens on
	proxy  *httputil.ReverseProxy
}

// NewAdminGate makes the gate to the admin API listening on socket.
func NewAdminGate(token, socket string) *AdminGate {
	g := &AdminGate{Token: token, Socket: socket}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1"})
			pr.Out.Host = "127.0.0.1"
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Origin") // the gate checked who asks
		},
		Transport:     &http.Transport{DialContext: dial, MaxIdleConns: 4, IdleConnTimeout: time.Minute},
		FlushInterval: -1, // a profile or a stream of events as it comes
	}
	return g
}

// monitorPaths are what the gate serves without the token: metrics and
// the probes, which tell how the server is, not how it is configured.
var monitorPaths = map[string]bool{"/metrics": true, "/ruvoy/ready": true, "/ruvoy/health": true}

func (g *AdminGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		http.Error(w, "host not allowed: "+r.Host, http.StatusForbidden)
		return
	}
	open := (r.Method == http.MethodGet || r.Method == http.MethodHead) && monitorPaths[r.URL.Path] && r.URL.RawPath == ""
	if !open && !g.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ruvoy admin"`)
		http.Error(w, "this admin endpoint needs the admin token: Authorization: Bearer <token> (--admin-token-file, RUVOY_ADMIN_TOKEN, or the one printed at start)", http.StatusUnauthorized)
		return
	}
	g.proxy.ServeHTTP(w, r)
}

func (g *AdminGate) authorized(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && g.Token != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(g.Token)) == 1
}

// loopbackHost reports whether a request's Host names the loopback.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
