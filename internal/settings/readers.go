package settings

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
)

// A Reader reads a setting's value and checks it. Its errors name the
// setting as given (the flag, the variable, the Caddyfile key) and say
// what it wants: "--max-requests: want an integer of at least 1, got "0"".
type Reader struct {
	// Flag reads a flag's text (or Default, or Env's value) into the
	// value: what the handler's JSON field holds, or what the command
	// line keeps for a flag of its own.
	Flag func(name, text string) (any, error)
	// Caddyfile reads one argument of the Caddyfile key; nil: as Flag.
	// Flags count in plain units (MS, SECONDS, MIB) where the Caddyfile
	// writes durations and sizes, as Caddy's own directives do.
	Caddyfile func(name, text string) (any, error)
	Syntax    string // the Caddyfile key's arguments, as docs/configuration.md shows them
	Switch    bool   // takes no value: named, it is on
	Adds      bool   // repeatable: each value adds to the list (else the last wins)
	Block     bool   // in the Caddyfile, a block the directive reads itself
}

// The readers the table uses.
var (
	word  = Reader{Flag: text, Syntax: "<name>"}
	path  = Reader{Flag: text, Syntax: "<path>"}
	on    = Reader{Flag: func(string, string) (any, error) { return true, nil }, Switch: true}
	dirs  = Reader{Flag: func(_, v string) (any, error) { return []string{v}, nil }, Adds: true, Syntax: "<dir...>"}
	names = Reader{Flag: func(_, v string) (any, error) { return strings.Split(v, ","), nil }}
	// An empty object turns a feature on; the Caddyfile's block configures it.
	feature   = Reader{Flag: func(string, string) (any, error) { return map[string]any{}, nil }, Switch: true, Block: true}
	upstreams = Reader{Flag: readUpstream, Adds: true, Block: true}
	workers   = Reader{Flag: readWorkers, Syntax: "<n>|auto"}
	millis    = Reader{Flag: readMillis, Caddyfile: readDuration, Syntax: "<duration>"}
	seconds   = Reader{Flag: readSeconds(math.SmallestNonzeroFloat64, "a number of seconds above 0"), Caddyfile: readDuration, Syntax: "<duration>"}
	mebibytes = Reader{Flag: readInt(1, "", 1<<20), Caddyfile: readSize, Syntax: "<size>"}
	cidrs     = Reader{Flag: readCIDRs, Adds: true}
	urlPath   = Reader{Flag: readPath}
)

// count reads an integer of at least min (want: what the error says it
// wants, "" for that).
func count(min int64, want string) Reader {
	return Reader{Flag: readInt(min, want, 0), Syntax: "<n>"}
}

// size reads a number of bytes: an integer for a flag, a size with units
// (16MB, 1MiB) in the Caddyfile.
func size(min int64, want string) Reader {
	return Reader{Flag: readInt(min, want, 0), Caddyfile: readSize, Syntax: "<size>"}
}

// secondsFrom0 reads a number of seconds, 0 or more, fractions allowed.
func secondsFrom0(want string) Reader { return Reader{Flag: readSeconds(0, want)} }

// wholeSeconds reads an integer number of seconds, 0 or more.
var wholeSeconds = Reader{Flag: func(name, v string) (any, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, wanted(name, "a number of seconds", v)
	}
	return time.Duration(n) * time.Second, nil
}}

// oneOf reads one of the words given.
func oneOf(words ...string) Reader {
	return Reader{Flag: func(name, v string) (any, error) {
		for _, w := range words {
			if v == w {
				return v, nil
			}
		}
		return nil, wanted(name, strings.Join(words, " or "), v)
	}}
}

func wanted(name, what, got string) error {
	return fmt.Errorf("%s: want %s, got %q", name, what, got)
}

func text(_, v string) (any, error) { return v, nil }

// readInt reads an integer of at least min; unit > 0 multiplies it (an
// int64 then: MiB to bytes), else it is an int.
func readInt(min int64, want string, unit int64) func(name, v string) (any, error) {
	if want == "" {
		want = fmt.Sprintf("an integer of at least %d", min)
	}
	return func(name, v string) (any, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return nil, wanted(name, want, v)
		}
		if unit > 0 {
			return n * unit, nil
		}
		return int(n), nil
	}
}

// readSeconds reads a number of seconds of at least min, fractions
// allowed.
func readSeconds(min float64, want string) func(name, v string) (any, error) {
	return func(name, v string) (any, error) {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n >= min) || math.IsInf(n, 0) { // NaN fails n >= min
			return nil, wanted(name, want, v)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
}

func readMillis(name, v string) (any, error) {
	n, err := readInt(0, "", 0)(name, v)
	if err != nil {
		return nil, err
	}
	return time.Duration(n.(int)) * time.Millisecond, nil
}

func readDuration(name, v string) (any, error) {
	d, err := caddy.ParseDuration(v)
	if err != nil {
		return nil, wanted(name, "a duration such as 250ms or 30s", v)
	}
	return d, nil
}

func readSize(name, v string) (any, error) {
	n, err := humanize.ParseBytes(v)
	if err != nil || n > math.MaxInt64 {
		return nil, wanted(name, "a size such as 1048576, 16MB or 1MiB", v)
	}
	return int64(n), nil
}

// maxWorkers bounds workers: more processes than this is a typo.
const maxWorkers = 256

// readWorkers reads a number of worker processes, or auto (one per core).
func readWorkers(name, v string) (any, error) {
	if v == "auto" {
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxWorkers {
		return nil, wanted(name, fmt.Sprintf("a number of workers from 0 to %d, or auto", maxWorkers), v)
	}
	return n, nil
}

// readCIDRs reads a comma-separated list of IP ranges and addresses.
func readCIDRs(name, v string) (any, error) {
	list := strings.Split(v, ",")
	for _, cidr := range list {
		if _, _, err := net.ParseCIDR(cidr); err != nil && net.ParseIP(cidr) == nil {
			return nil, fmt.Errorf("%s: %q is not an IP range (CIDR) or address", name, cidr)
		}
	}
	return list, nil
}

// readPath reads a URL path that a route can match exactly.
func readPath(name, v string) (any, error) {
	if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, "*?# ") {
		return nil, wanted(name, "a path such as /up", v)
	}
	return v, nil
}

// Upstream is an upstream an --upstream defines: NAME=URL[,URL...].
type Upstream struct {
	Name  string
	Hosts []string // host:port
	TLS   bool
}

// readUpstream reads NAME=URL[,URL...] into a list of one Upstream.
func readUpstream(name, v string) (any, error) {
	up, urls, ok := strings.Cut(v, "=")
	if !ok || up == "" || urls == "" || strings.ContainsAny(up, ", ") {
		return nil, wanted(name, "NAME=URL[,URL...]", v)
	}
	u := Upstream{Name: up}
	for i, raw := range strings.Split(urls, ",") {
		parsed, err := url.Parse(raw)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || (parsed.Path != "" && parsed.Path != "/") {
			return nil, fmt.Errorf("%s %s: %q is not an http:// or https:// URL with no path", name, up, raw)
		}
		if i > 0 && (parsed.Scheme == "https") != u.TLS {
			return nil, fmt.Errorf("%s %s: mixes http and https", name, up)
		}
		u.TLS = parsed.Scheme == "https"
		host := parsed.Host
		if parsed.Port() == "" {
			host = net.JoinHostPort(parsed.Hostname(), map[bool]string{true: "443", false: "80"}[u.TLS])
		}
		u.Hosts = append(u.Hosts, host)
	}
	return []Upstream{u}, nil
}
