package serve

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"strconv"
)

// ContextOptions turn on env["ruvoy.context"] for an app.
type ContextOptions struct {
	RouteName     string
	RouteMetadata map[string]any // namespace -> values
	// DynamicMetadata returns values set by handlers ahead of ruvoy, by
	// namespace (Caddy vars); nil: none.
	DynamicMetadata func(r *http.Request) map[string]any
	// ConnectionID names the request's connection; ok false: unknown.
	ConnectionID func(r *http.Request) (id uint64, ok bool)
}

// contextJSON is what env["ruvoy.context"] holds for r, copied now.
func (o *ContextOptions) contextJSON(r *http.Request) []byte {
	c := map[string]any{"route_name": nil, "connection": connectionInfo(r, o.ConnectionID), "tls": tlsInfo(r.TLS)}
	if o.RouteName != "" {
		c["route_name"] = o.RouteName
	}
	c["route_metadata"] = orEmpty(o.RouteMetadata)
	var dynamic map[string]any
	if o.DynamicMetadata != nil {
		dynamic = o.DynamicMetadata(r)
	}
	c["dynamic_metadata"] = orEmpty(dynamic)
	b, err := json.Marshal(c)
	if err != nil { // a value JSON cannot carry: keep what can be carried
		delete(c, "dynamic_metadata")
		delete(c, "route_metadata")
		b, _ = json.Marshal(c)
	}
	return b
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func connectionInfo(r *http.Request, id func(*http.Request) (uint64, bool)) map[string]any {
	info := map[string]any{"id": nil}
	if id != nil {
		if n, ok := id(r); ok {
			info["id"] = n
		}
	}
	info["source_address"], info["source_port"] = splitAddr(r.RemoteAddr)
	info["destination_address"], info["destination_port"] = nil, nil
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		info["destination_address"], info["destination_port"] = splitAddr(addr.String())
	}
	return info
}

func splitAddr(addr string) (any, any) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return host, nil
	}
	return host, n
}

func tlsInfo(cs *tls.ConnectionState) any {
	if cs == nil {
		return nil
	}
	info := map[string]any{
		"version":          tls.VersionName(cs.Version),
		"cipher":           tls.CipherSuiteName(cs.CipherSuite),
		"server_name":      cs.ServerName,
		"alpn":             cs.NegotiatedProtocol,
		"peer_certificate": nil,
		"uri_san":          []string{},
		"dns_san":          []string{},
	}
	if len(cs.PeerCertificates) > 0 {
		leaf := cs.PeerCertificates[0]
		info["peer_certificate"] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))
		uris := make([]string, 0, len(leaf.URIs))
		for _, u := range leaf.URIs {
			uris = append(uris, u.String())
		}
		info["uri_san"] = uris
		info["dns_san"] = append([]string{}, leaf.DNSNames...)
	}
	return info
}
