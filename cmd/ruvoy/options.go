package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

const usage = `Usage: ruvoy [options] [config.ru]
    -p, --port PORT          Listen on PORT (default 8080, or $PORT when set)
    -a, --address ADDRESS    Bind to ADDRESS (default 127.0.0.1); localhost binds 127.0.0.1 and
                             ::1; unix:///PATH listens on a unix socket (mode 0660;
                             unix:///PATH|0666 to choose), fd/N on descriptor N (systemd
                             socket activation)
    -e, --environment ENV    RACK_ENV for the app (default: $RACK_ENV, else development)
    -w, --workers N          Run the app in N worker processes, one VM each, behind this
                             one (cluster mode); auto: one per core (default: $WEB_CONCURRENCY,
                             else 0: the app runs in this process)
        --worker-max-rss MIB Replace a worker whose memory grows past MIB (checked as its
                             requests end; cluster mode; default: never)
        --worker-timeout SECONDS
                             Kill a worker that has not reported for SECONDS (stopped, frozen),
                             answering its requests 504, or has not loaded the app in 4x SECONDS;
                             a new one takes its place (default 30)
        --preload            Boot the app once and fork the workers from it: they share its
                             memory (cluster mode; the app must be fork-safe)
        --tls-cert FILE      Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN, and HTTP/3 on the same
        --tls-key FILE       port) with this certificate and key (PEM)
        --tls-client-ca FILE Ask clients for certificates signed by this CA (PEM); the app
                             sees a verified one in env["ruvoy.context"]
        --tls-internal       Serve HTTPS with a certificate from Caddy's own local CA
        --domain NAME        Serve NAME over HTTPS on :443 with a certificate from Let's
                             Encrypt (automatic HTTPS; needs a public DNS name)
        --h2c                Also accept cleartext HTTP/2 (by prior knowledge)
        --context            Give the app env["ruvoy.context"] (connection, TLS, route)
        --upstream NAME=URL[,URL...]
                             Define an upstream the app may call through
                             env["ruvoy.upstream"] (repeatable; http:// or https://)
        --static DIR         Serve files that exist under DIR from Caddy's file server, without
                             Ruby (with RAILS_SERVE_STATIC_FILES set: the app's public/);
                             dotfiles and symlinks out of DIR go to the app instead
        --sendfile-dir DIR   Let X-Sendfile / X-Accel-Redirect response headers name files
                             under DIR, which Go then sends (repeatable)
        --trusted-proxies CIDR[,CIDR...]
                             Peers whose X-Forwarded-* headers are believed (default: none;
                             from others those headers are dropped); the client is the
                             rightmost X-Forwarded-For address that is not one of them
        --max-body-bytes N   Refuse request bodies over N bytes with 413 (default: no limit)
        --max-requests N     Admit at most N requests to Ruby at once; more get 503 (default 1024)
        --queue-timeout MS   Let a request over --max-requests wait MS for a place (default 0)
        --max-requests-per-connection N
                             Admit at most N requests of one HTTP/2 or HTTP/3 connection to Ruby
                             at once; more wait for one of them to end (default 100, or a
                             quarter of --max-requests when that is less)
        --max-requests-per-client N
                             Admit at most N requests of one client address (IPv6: its /64;
                             behind --trusted-proxies, the address they forward) to Ruby at
                             once, over all its connections; more are refused as over
                             --max-requests (default: a quarter of --max-requests, at least 64)
        --write-timeout SECONDS
                             Cut a response whose client takes none of it for SECONDS (a write
                             of up to 64 KiB that does not finish); 0: never (default 30)
        --max-inflight-body-bytes N
                             Hold at most N request body bytes in memory across requests;
                             a request that would pass it gets 503 (default 67108864)
        --hold-warn MS       Warn (with the Ruby backtrace) when a request holds the VM
                             thread over MS without yielding (default 100; 0: off)
        --request-timeout SECONDS
                             Raise Ruvoy::RequestTimeout in a request that runs longer,
                             answering 503 (default: none)
        --vm-hold-limit SECONDS
                             Exit (status 4) when Ruby code holds the VM thread this long
                             without yielding, for a supervisor to restart (default: never)
        --min-upload-rate BYTES
                             Answer 408 to request bodies that arrive slower than BYTES a
                             second, after a first minute (default 1024; 0: off)
        --grace SECONDS      On SIGTERM/SIGINT, let requests finish for up to SECONDS (default 10;
                             0: without a limit)
        --health-path PATH   Answer PATH on the serving port from Go, for load balancers: 200
                             while serving; 503 before the app has booted, while stopping,
                             and when Ruby code has held the VM thread 30 s (default: none)
        --drain-delay SECONDS
                             On SIGTERM/SIGINT, serve on for SECONDS, --health-path answering
                             503, before taking no new connections (default 5 with
                             --health-path, else 0)
        --pidfile FILE       Write the process id to FILE once serving (removed on exit)
        --reuse-port         Share the port with a process already serving it (an overlapping
                             restart); without it ruvoy refuses a port that is in use
        --compress           Compress text responses (zstd or gzip, as the client accepts)
        --early-hints-http1  Send the app's 103 Early Hints to HTTP/1.1 clients too (default: only
                             over HTTP/2 and HTTP/3, where browsers act on them)
        --access-log         Log every request, to stdout: Caddy's entries, as text on a
                             terminal and JSON lines otherwise
        --access-log-format FORMAT
                             Log every request, to stdout, as common (a line as
                             Rack::CommonLogger writes it) or json (JSON lines, always)
        --filter-parameters NAME[,NAME...]
                             Log [FILTERED] for query parameters whose names contain one of
                             these (default: Rails' list, passw,secret,token,_key,crypt,
                             salt,certificate,otp,ssn)
        --admin-port PORT    Serve /metrics, /ruvoy/ready and /ruvoy/health on 127.0.0.1:PORT, and
                             the rest of Caddy's admin API (config, /load, /stop, pprof) to
                             requests with the admin token ("Authorization: Bearer TOKEN")
        --admin-token-file FILE
                             The admin token: FILE's first line (default: $RUVOY_ADMIN_TOKEN,
                             else one made at start and printed once)
        --admin-socket PATH  Serve Caddy's whole admin API, without a token, on the unix socket
                             PATH, mode 0600: the server's user only (ruvoy reload and ruvoy
                             stop --address unix/PATH)
        --print-config       Print the generated Caddy JSON configuration and exit
    -v, --version            Print versions (ruvoy, ruby, caddy, the Ruby ABI built for) and exit
    -h, --help

config.ru defaults to ./config.ru.

ruvoy is also Caddy with the ruvoy module built in: "ruvoy run --config
Caddyfile", "ruvoy reload", "ruvoy list-modules" and the other Caddy
subcommands work as in caddy ("ruvoy help COMMAND" tells of each).
`

const usageHint = "Run 'ruvoy --help' for usage.\n"

// defaultMinUploadRate is --min-upload-rate's default: Apache's
// mod_reqtimeout asks 500 bytes a second of a body; twice that is still a
// slow modem's rate.
const defaultMinUploadRate = 1024

// defaultWriteTimeout is --write-timeout's default, in seconds: between
// Puma's 10 and nginx's 60 (send_timeout).
const defaultWriteTimeout = 30

// defaultFilterParameters are the names a new Rails app filters from its
// logs (config/initializers/filter_parameter_logging.rb).
var defaultFilterParameters = []string{"passw", "secret", "token", "_key", "crypt", "salt", "certificate", "otp", "ssn"}

var errHelp = pflag.ErrHelp // pflag's answer to -h and --help, which are left undefined

type options struct {
	port, address, environment string
	adminPort                  string
	adminSocket                string // Caddy's admin API here (--admin-socket), or ""
	adminToken                 string // the admin port's token, or "" until prepareAdmin makes one
	adminTokenMade             bool   // prepareAdmin made it: print it
	adminDir                   string // prepareAdmin's directory for the admin API's socket
	grace                      int
	healthPath                 string  // "": none
	drainDelay                 float64 // seconds; -1: the default
	maxBodyBytes               int64
	maxRequests, queueTimeout  int
	maxPerConnection           int     // 0: the default
	maxPerClient               int     // 0: the default
	writeTimeout               float64 // seconds; 0: never
	workerTimeout              float64 // seconds; 0: the default
	workers                    int     // 0: the app runs in this process
	workerMaxRSS               int64   // MiB; 0: none
	holdWarn                   int     // ms; -1: the default
	requestTimeout, holdLimit  float64 // seconds; 0: none
	minUploadRate              int     // bytes a second; 0: off
	bodyBudget                 int64
	accessLog, h2c, reusePort  bool
	accessLogFormat            string // json or common; "": Caddy's choice
	compress, earlyHintsHTTP1  bool
	preload                    bool
	filterParameters           []string // query parameter names the access log hides
	printConfig, version       bool
	rackupArg, rackup          string
	rest                       []string // ARGV for the app
	upstreams                  []upstream
	warnings                   []string // deprecated options used, for the log
	static                     string
	tlsCert, tlsKey            string
	tlsClientCA, domain        string
	tlsInternal, context       bool
	portGiven, addressGiven    bool
	sendfileDirs               []string
	pidfile                    string
	socket                     string // a unix socket path or fd/N: the address is not host:port
	trustedProxies             []string
}

// listen is the address as Caddy reads it (unix//PATH, fd/N or host:port):
// the first of listens.
func (o *options) listen() string { return o.listens()[0] }

// listens is every address the server listens on, as Caddy reads them.
// localhost is each loopback address the machine has, 127.0.0.1 and ::1,
// as Puma binds it (a browser may try either); with -p 0 only the first,
// as the kernel would pick each its own port.
func (o *options) listens() []string {
	if o.socket != "" {
		return []string{o.socket}
	}
	if o.address != "localhost" {
		return []string{net.JoinHostPort(o.address, o.port)}
	}
	var out []string
	for _, ip := range loopbacks() {
		out = append(out, net.JoinHostPort(ip, o.port))
		if o.port == "0" {
			break
		}
	}
	return out
}

// loopbacks is the machine's loopback addresses, IPv4 first: 127.0.0.1,
// and ::1 unless IPv6 is off.
func loopbacks() []string {
	ips := []string{"127.0.0.1"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.IPv6loopback) {
			ips = append(ips, "::1")
			break
		}
	}
	return ips
}

// url is where the banner says the app is served.
func (o *options) url() string {
	switch {
	case o.domain != "":
		if o.port == "443" {
			return "https://" + o.domain
		}
		return "https://" + net.JoinHostPort(o.domain, o.port)
	case strings.HasPrefix(o.socket, "unix/"):
		path, _, _ := strings.Cut(strings.TrimPrefix(o.socket, "unix/"), "|")
		return "unix://" + path
	case o.socket != "":
		return o.socket
	case o.tls():
		return "https://" + o.listen()
	}
	return "http://" + o.listen()
}

// parseOptions reads GNU-style options (pflag's): -p 80, -p80, --port 80,
// --port=80, before or after the rackup; -- ends them.
func parseOptions(args []string, getenv func(string) string) (*options, error) {
	o := &options{port: "8080", address: "127.0.0.1", environment: "development", grace: 10, drainDelay: -1, holdWarn: -1,
		minUploadRate: defaultMinUploadRate, filterParameters: defaultFilterParameters, writeTimeout: defaultWriteTimeout}
	if p := getenv("PORT"); p != "" {
		o.port = p
	}
	if e := getenv("RACK_ENV"); e != "" {
		o.environment = e
	}
	if n := getenv("WEB_CONCURRENCY"); n != "" {
		var err error
		if o.workers, err = workersValue(n); err != nil {
			return nil, fmt.Errorf("WEB_CONCURRENCY: %w", err)
		}
	}
	fs := pflag.NewFlagSet("ruvoy", pflag.ContinueOnError)
	fs.Usage = func() {} // main prints usage and errors itself
	fs.SetOutput(io.Discard)
	fs.StringVarP(&o.port, "port", "p", o.port, "")
	fs.StringVarP(&o.address, "address", "a", o.address, "")
	fs.StringVarP(&o.environment, "environment", "e", o.environment, "")
	fs.StringVar(&o.pidfile, "pidfile", "", "")
	fs.StringVar(&o.pidfile, "pid", "", "") // an alias of --pidfile
	fs.MarkHidden("pid")
	for name, p := range map[string]*string{"tls-cert": &o.tlsCert, "tls-key": &o.tlsKey, "tls-client-ca": &o.tlsClientCA,
		"domain": &o.domain, "admin-port": &o.adminPort, "static": &o.static, "health-path": &o.healthPath,
		"admin-socket": &o.adminSocket} {
		fs.StringVar(p, name, "", "")
	}
	// A switch is on once named, whatever follows an = (as ever).
	on := func(p *bool) func(string) error { return func(string) error { *p = true; return nil } }
	fs.BoolFuncP("version", "v", "", on(&o.version))
	for name, p := range map[string]*bool{"tls-internal": &o.tlsInternal, "context": &o.context, "h2c": &o.h2c,
		"access-log": &o.accessLog, "compress": &o.compress, "early-hints-http1": &o.earlyHintsHTTP1, "preload": &o.preload, "reuse-port": &o.reusePort, "print-config": &o.printConfig} {
		fs.BoolFunc(name, "", on(p))
	}
	fs.Func("access-log-format", "", func(v string) error {
		if v != "json" && v != "common" {
			return fmt.Errorf("--access-log-format: want json or common, got %q", v)
		}
		o.accessLog, o.accessLogFormat = true, v
		return nil
	})
	fs.FuncP("workers", "w", "", func(v string) (err error) {
		if o.workers, err = workersValue(v); err != nil {
			return fmt.Errorf("-w: %w", err)
		}
		return nil
	})
	intFlag(fs, &o.grace, "grace", 0, "a number of seconds")
	intFlag(fs, &o.maxBodyBytes, "max-body-bytes", 0, "a number of bytes")
	intFlag(fs, &o.workerMaxRSS, "worker-max-rss", 1, "")
	intFlag(fs, &o.maxRequests, "max-requests", 1, "")
	intFlag(fs, &o.queueTimeout, "queue-timeout", 0, "")
	intFlag(fs, &o.maxPerConnection, "max-requests-per-connection", 1, "")
	intFlag(fs, &o.maxPerClient, "max-requests-per-client", 1, "")
	intFlag(fs, &o.bodyBudget, "max-inflight-body-bytes", 1, "")
	intFlag(fs, &o.holdWarn, "hold-warn", 0, "")
	// --stall-warn was --hold-warn's name: it still works, and says so.
	fs.Func("stall-warn", "", func(v string) error {
		o.warnings = append(o.warnings, "--stall-warn is deprecated: it is now --hold-warn (same value)")
		return fs.Lookup("hold-warn").Value.Set(v)
	})
	fs.MarkHidden("stall-warn")
	intFlag(fs, &o.minUploadRate, "min-upload-rate", 0, "")
	secondsFlag(fs, &o.requestTimeout, "request-timeout")
	secondsFlag(fs, &o.holdLimit, "vm-hold-limit")
	secondsFlag(fs, &o.workerTimeout, "worker-timeout")
	fs.Func("write-timeout", "", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) {
			return fmt.Errorf("--write-timeout: want a number of seconds (0: never), got %q", v)
		}
		o.writeTimeout = n
		return nil
	})
	fs.Func("drain-delay", "", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) {
			return fmt.Errorf("--drain-delay: want a number of seconds, got %q", v)
		}
		o.drainDelay = n
		return nil
	})
	fs.Func("upstream", "", func(v string) error {
		u, err := parseUpstream("--upstream", v)
		o.upstreams = append(o.upstreams, u)
		return err
	})
	// --cluster was --upstream's name: it still works, and says so.
	fs.Func("cluster", "", func(v string) error {
		o.warnings = append(o.warnings, "--cluster is deprecated: it is now --upstream (same value)")
		u, err := parseUpstream("--cluster", v)
		o.upstreams = append(o.upstreams, u)
		return err
	})
	fs.MarkHidden("cluster")
	fs.StringArrayVar(&o.sendfileDirs, "sendfile-dir", nil, "")
	fs.Func("trusted-proxies", "", func(v string) (err error) {
		for _, cidr := range strings.Split(v, ",") {
			if _, _, e := net.ParseCIDR(cidr); e != nil && net.ParseIP(cidr) == nil {
				err = fmt.Errorf("--trusted-proxies: %q is not an IP range (CIDR) or address", cidr)
			}
			o.trustedProxies = append(o.trustedProxies, cidr)
		}
		return err
	})
	var adminTokenFile string
	fs.StringVar(&adminTokenFile, "admin-token-file", "", "")
	fs.Func("filter-parameters", "", func(v string) error {
		o.filterParameters = strings.Split(v, ",")
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, optionError(err)
	}
	o.portGiven, o.addressGiven = fs.Changed("port"), fs.Changed("address")
	if strings.HasPrefix(o.address, "[") && strings.HasSuffix(o.address, "]") {
		o.address = o.address[1 : len(o.address)-1] // [::1], as in a URL
	}
	positional := fs.Args()
	if err := o.checkTLS(); err != nil {
		return nil, err
	}
	if err := o.checkSocket(); err != nil {
		return nil, err
	}
	if o.preload && o.workers == 0 {
		return nil, errors.New("--preload forks workers: give --workers N (or WEB_CONCURRENCY) too")
	}
	if o.healthPath != "" && (!strings.HasPrefix(o.healthPath, "/") || strings.ContainsAny(o.healthPath, "*?# ")) {
		return nil, fmt.Errorf("--health-path: want a path such as /up, got %q", o.healthPath)
	}
	if o.drainDelay < 0 {
		// A balancer's health check needs a few intervals to see the 503.
		o.drainDelay = 0
		if o.healthPath != "" {
			o.drainDelay = 5
		}
	}
	if o.pidfile != "" {
		abs, err := filepath.Abs(o.pidfile)
		if err != nil {
			return nil, err
		}
		o.pidfile = abs
	}
	if err := checkPort("port", o.port); err != nil {
		return nil, err
	}
	if o.adminPort != "" {
		if err := checkPort("admin port", o.adminPort); err != nil {
			return nil, err
		}
		// Caddy's listeners set SO_REUSEPORT: on one port the admin API
		// and the app would share the connections, each getting some.
		if o.adminPort == o.port && o.port != "0" && o.socket == "" {
			return nil, fmt.Errorf("--admin-port %s is the port the app is served on", o.adminPort)
		}
	}
	var err error
	switch {
	case adminTokenFile != "" && o.adminPort == "":
		return nil, errors.New("--admin-token-file is the token of --admin-port: give both")
	case adminTokenFile != "":
		if o.adminToken, err = readAdminToken(adminTokenFile); err != nil {
			return nil, err
		}
	case o.adminPort != "":
		o.adminToken = strings.TrimSpace(getenv(adminTokenEnv))
	}
	if o.adminSocket != "" {
		if o.adminSocket, err = filepath.Abs(o.adminSocket); err != nil {
			return nil, err
		}
	}
	if len(positional) > 1 {
		return nil, fmt.Errorf("one rackup file at most, got %s", strings.Join(positional, " "))
	}
	o.rackupArg = "config.ru"
	if len(positional) == 1 {
		o.rackupArg = positional[0]
	}
	o.rest = positional
	abs, err := filepath.Abs(o.rackupArg)
	if err != nil {
		return nil, err
	}
	o.rackup = abs
	if o.static == "" && getenv("RAILS_SERVE_STATIC_FILES") != "" {
		if public := filepath.Join(filepath.Dir(abs), "public"); isDir(public) {
			o.static = public
		}
	}
	if o.static != "" {
		if o.static, err = filepath.Abs(o.static); err != nil || !isDir(o.static) {
			return nil, fmt.Errorf("--static: %s is not a directory", o.static)
		}
	}
	for i, dir := range o.sendfileDirs {
		if o.sendfileDirs[i], err = filepath.Abs(dir); err != nil || !isDir(o.sendfileDirs[i]) {
			return nil, fmt.Errorf("--sendfile-dir: %s is not a directory", dir)
		}
	}
	return o, nil
}

// maxWorkers bounds -w: more processes than this is a typo.
const maxWorkers = 256

// workersValue reads -w and WEB_CONCURRENCY: a number of worker
// processes, or auto (one per core).
func workersValue(v string) (int, error) {
	if v == "auto" {
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxWorkers {
		return 0, fmt.Errorf("want a number of workers from 0 to %d, or auto, got %q", maxWorkers, v)
	}
	return n, nil
}

// checkSocket reads an address that is not a host: unix:///PATH (as Puma
// writes it, or unix/PATH, Caddy's form) and fd/N (a listening socket
// handed over, as systemd's socket activation does: LISTEN_FDS names 3 and
// up).
func (o *options) checkSocket() error {
	a := o.address
	switch {
	case strings.HasPrefix(a, "unix:"), strings.HasPrefix(a, "unix/"):
		path := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(a, "unix:"), "unix"), "/")
		if path == "" {
			return fmt.Errorf("--address %s: no socket path", a)
		}
		abs, err := filepath.Abs("/" + path)
		if strings.HasPrefix(a, "unix:") && !strings.HasPrefix(a, "unix:/") {
			abs, err = filepath.Abs(path) // unix:relative/path
		}
		if err != nil {
			return err
		}
		if !strings.Contains(abs, "|") {
			abs += "|0660" // the owner and its group (a proxy's) may connect; Caddy's default is the owner only
		}
		o.socket = "unix/" + abs
	case strings.HasPrefix(a, "fd/"), strings.HasPrefix(a, "fd://"):
		n := strings.TrimPrefix(strings.TrimPrefix(a, "fd://"), "fd/")
		if fd, err := strconv.Atoi(n); err != nil || fd < 3 {
			return fmt.Errorf("--address %s: want fd/N with N a listening socket's descriptor, 3 or more", a)
		}
		o.socket = "fd/" + n
	default:
		return nil
	}
	switch {
	case o.portGiven:
		return fmt.Errorf("--port and --address %s exclude each other: the socket is the address", a)
	case o.tls():
		return fmt.Errorf("--address %s serves cleartext only; TLS belongs to the proxy in front", a)
	}
	return nil
}

// tls says whether the server speaks HTTPS.
func (o *options) tls() bool { return o.tlsCert != "" || o.tlsInternal || o.domain != "" }

func (o *options) checkTLS() error {
	switch {
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case o.tlsCert != "" && (o.tlsInternal || o.domain != ""):
		return errors.New("--tls-cert, --tls-internal and --domain exclude each other")
	case o.tlsInternal && o.domain != "":
		return errors.New("--tls-internal and --domain exclude each other")
	case o.tlsClientCA != "" && !o.tls():
		return errors.New("--tls-client-ca needs HTTPS (--tls-cert, --tls-internal or --domain)")
	}
	for _, f := range []*string{&o.tlsCert, &o.tlsKey, &o.tlsClientCA} {
		if *f == "" {
			continue
		}
		abs, err := filepath.Abs(*f)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("no such file: %s", *f)
		}
		*f = abs
	}
	if o.domain != "" {
		if !o.portGiven {
			o.port = "443"
		}
		if !o.addressGiven {
			o.address = "0.0.0.0"
		}
	}
	return nil
}

// upstream is an --upstream NAME=URL[,URL...].
type upstream struct {
	name  string
	hosts []string // host:port
	tls   bool
}

// parseUpstream reads an --upstream value (flag: the option as given).
func parseUpstream(flag, v string) (upstream, error) {
	name, urls, ok := strings.Cut(v, "=")
	if !ok || name == "" || urls == "" || strings.ContainsAny(name, ", ") {
		return upstream{}, fmt.Errorf("%s: want NAME=URL[,URL...], got %q", flag, v)
	}
	u := upstream{name: name}
	for i, raw := range strings.Split(urls, ",") {
		parsed, err := url.Parse(raw)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || (parsed.Path != "" && parsed.Path != "/") {
			return upstream{}, fmt.Errorf("%s %s: %q is not an http:// or https:// URL with no path", flag, name, raw)
		}
		if i > 0 && (parsed.Scheme == "https") != u.tls {
			return upstream{}, fmt.Errorf("%s %s: mixes http and https", flag, name)
		}
		u.tls = parsed.Scheme == "https"
		host := parsed.Host
		if parsed.Port() == "" {
			host = net.JoinHostPort(parsed.Hostname(), map[bool]string{true: "443", false: "80"}[u.tls])
		}
		u.hosts = append(u.hosts, host)
	}
	return u, nil
}

// optionError words pflag's errors as ruvoy's own.
func optionError(err error) error {
	dashed := func(name, shorthands string) string {
		if shorthands != "" {
			return "-" + name
		}
		return "--" + name
	}
	switch e := err.(type) {
	case *pflag.ValueRequiredError:
		return fmt.Errorf("option %s needs a value", dashed(e.GetSpecifiedName(), e.GetSpecifiedShortnames()))
	case *pflag.NotExistError:
		return fmt.Errorf("unknown option %s", dashed(e.GetSpecifiedName(), e.GetSpecifiedShortnames()))
	case *pflag.InvalidSyntaxError: // ---x, --=x
		name, _, _ := strings.Cut(e.GetSpecifiedFlag(), "=")
		return fmt.Errorf("unknown option %s", name)
	case *pflag.InvalidValueError:
		return e.Unwrap() // the option's own message
	}
	return err
}

// intFlag defines an integer option of at least min; want names what it
// is in its error (default: an integer of at least min).
func intFlag[T int | int64](fs *pflag.FlagSet, p *T, name string, min T, want string) {
	if want == "" {
		want = fmt.Sprintf("an integer of at least %d", min)
	}
	fs.Func(name, "", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < int64(min) {
			return fmt.Errorf("--%s: want %s, got %q", name, want, v)
		}
		*p = T(n)
		return nil
	})
}

// secondsFlag defines an option in seconds: a positive number, fractions
// allowed.
func secondsFlag(fs *pflag.FlagSet, p *float64, name string) {
	fs.Func(name, "", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n <= 0 || math.IsInf(n, 0) {
			return fmt.Errorf("--%s: want a number of seconds above 0, got %q", name, v)
		}
		*p = n
		return nil
	})
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

func checkPort(what, p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s: want a number from 0 to 65535, got %q", what, p)
	}
	return nil
}
