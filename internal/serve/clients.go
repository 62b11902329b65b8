package serve

import (
	"net/http"
	"net/netip"
	"sync"
)

// clientPlaces counts each client's requests in Ruby, across its
// connections and protocols. The per-connection bound (connPlaces) stops
// one connection from holding every place; this stops one client that
// opens many: a dozen HTTP/2 connections whose streams never read would
// otherwise hold all of max-requests until the write timeout cut them.
//
// A client is its address as the server names it (Caddy's client IP,
// which honours trusted proxies), an IPv6 one by its /64: one host gets
// a /64 to itself, so the addresses in it are one client's.
type clientPlaces struct {
	limit int
	mu    sync.Mutex
	held  map[netip.Addr]clientHold
}

// clientHold is one client's count, and a channel closed at its next give,
// for its requests that wait (queue timeout).
type clientHold struct {
	n    int
	next chan struct{}
}

// defaultPerClient is the least a client may hold unless configured: a
// quarter of max-requests when that is more, so that one client leaves the
// rest to the others; a server of 64 places or fewer bounds no client.
const defaultPerClient = 64

func newClientPlaces(limit int) *clientPlaces {
	return &clientPlaces{limit: limit, held: map[netip.Addr]clientHold{}}
}

// take takes one of who's places if one is free (nil), or returns a
// channel closed when one may have become free.
func (p *clientPlaces) take(who netip.Addr) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.held[who]
	if h.n < p.limit {
		h.n++
		p.held[who] = h
		return nil
	}
	if h.next == nil {
		h.next = make(chan struct{})
		p.held[who] = h
	}
	return h.next
}

func (p *clientPlaces) give(who netip.Addr) {
	p.mu.Lock()
	h := p.held[who]
	h.n--
	if h.next != nil {
		close(h.next)
		h.next = nil
	}
	if h.n <= 0 {
		delete(p.held, who) // a client gone costs nothing
	} else {
		p.held[who] = h
	}
	p.mu.Unlock()
}

// clientOf is the client a request's places count against, from the
// address the server names (remote); false when it is none that can be
// counted (a unix socket's peer: the proxy in front, which bounds its own
// clients).
func clientOf(remote string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(remote)
	if err != nil {
		return netip.Addr{}, false
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return ip, true
}

// clientAddress is the address REMOTE_ADDR gives and places count
// against: Caddy's client IP when the app has it, else the connection's.
func (a *App) clientAddress(r *http.Request) string {
	if a.opts.ClientIP != nil {
		if ip := a.opts.ClientIP(r); ip != "" {
			return ip
		}
	}
	return remoteHost(r.RemoteAddr)
}
