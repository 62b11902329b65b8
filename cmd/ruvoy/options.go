package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	ruvoycaddy "github.com/ruvoy/ruvoy/caddy"
	"github.com/ruvoy/ruvoy/internal/settings"
)

// usage is --help: the flags of settings.Table between ruvoy's own lines.
func usage() string {
	return "Usage: ruvoy [options] [config.ru]\n" + settings.Usage() + usageTail
}

const usageTail = `
config.ru defaults to ./config.ru.

ruvoy is also Caddy with the ruvoy module built in: "ruvoy run --config
Caddyfile", "ruvoy reload", "ruvoy list-modules" and the other Caddy
subcommands work as in caddy ("ruvoy help COMMAND" tells of each).
`

const usageHint = "Run 'ruvoy --help' for usage.\n"

var errHelp = pflag.ErrHelp // pflag's answer to -h and --help, which are left undefined

type options struct {
	handler                   ruvoycaddy.Handler // the handler's settings the flags give (settings.Table's JSON)
	port, address             string
	adminPort                 string
	adminSocket               string // Caddy's admin API here (--admin-socket), or ""
	adminTokenFile            string
	adminToken                string // the admin port's token, or "" until prepareAdmin makes one
	adminTokenMade            bool   // prepareAdmin made it: print it
	adminDir                  string // prepareAdmin's directory for the admin API's socket
	grace, drainDelay         time.Duration
	writeTimeout              time.Duration // 0: never
	healthPath                string        // "": none
	minUploadRate             int           // bytes a second; 0: off
	accessLog, h2c, reusePort bool
	accessLogFormat           string // json or common; "": Caddy's choice
	compress                  bool
	filterParameters          []string // query parameter names the access log hides
	printConfig, version      bool
	rackupArg, rackup         string
	rest                      []string // ARGV for the app
	upstreams                 []settings.Upstream
	warnings                  []string // deprecated options used, for the log
	static                    string
	tlsCert, tlsKey           string
	tlsClientCA, domain       string
	tlsInternal               bool
	portGiven, addressGiven   bool
	pidfile                   string
	socket                    string // a unix socket path or fd/N: the address is not host:port
	trustedProxies            []string
}

// places are where the flags that set no handler field put their values
// (settings.Table: the flags without JSON, and --upstream, which
// buildConfig makes into an app of its own).
func (o *options) places() map[string]any {
	return map[string]any{
		"port": &o.port, "address": &o.address, "tls-cert": &o.tlsCert, "tls-key": &o.tlsKey,
		"tls-client-ca": &o.tlsClientCA, "tls-internal": &o.tlsInternal, "domain": &o.domain, "h2c": &o.h2c,
		"upstream": &o.upstreams, "static": &o.static, "trusted-proxies": &o.trustedProxies,
		"write-timeout": &o.writeTimeout, "min-upload-rate": &o.minUploadRate, "grace": &o.grace,
		"health-path": &o.healthPath, "drain-delay": &o.drainDelay, "pidfile": &o.pidfile, "reuse-port": &o.reusePort,
		"compress": &o.compress, "access-log": &o.accessLog, "access-log-format": &o.accessLogFormat,
		"filter-parameters": &o.filterParameters, "admin-port": &o.adminPort, "admin-token-file": &o.adminTokenFile,
		"admin-socket": &o.adminSocket, "print-config": &o.printConfig, "version": &o.version,
	}
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
	o := &options{}
	given := settings.Values{}
	fs, err := o.flags(given, getenv)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, optionError(err)
	}
	if err := given.Decode(&o.handler); err != nil {
		return nil, err
	}
	o.portGiven, o.addressGiven = fs.Changed("port"), fs.Changed("address")
	if o.healthPath != "" && !fs.Changed("drain-delay") {
		o.drainDelay = 5 * time.Second // a balancer's health check needs a few intervals to see the 503
	}
	o.accessLog = o.accessLog || o.accessLogFormat != ""
	if err := o.check(fs.Args(), getenv); err != nil {
		return nil, err
	}
	return o, nil
}

// flags registers every flag of settings.Table (and the names some had
// before), after setting each one's default: its Default, or its Env's
// value. A handler setting's value goes to given, by its JSON field; any
// other to its place in o.
func (o *options) flags(given settings.Values, getenv func(string) string) (*pflag.FlagSet, error) {
	fs := pflag.NewFlagSet("ruvoy", pflag.ContinueOnError)
	fs.Usage = func() {} // main prints usage and errors itself
	fs.SetOutput(io.Discard)
	places := o.places()
	for i := range settings.Table {
		s := &settings.Table[i]
		if s.Flag == "" || s.Flag == "help" { // help: pflag answers ErrHelp
			continue
		}
		set := setter(s, places[s.Flag], given)
		if err := setDefault(s, set, getenv); err != nil {
			return nil, err
		}
		addFlag(fs, s, s.Flag, s.Short, set)
		if s.Alias != "" {
			addFlag(fs, s, s.Alias, "", set)
		}
	}
	for _, r := range settings.RenamedIn(settings.InFlags) {
		s := settings.ByFlag(r.New)
		set := setter(s, places[s.Flag], given)
		addFlag(fs, s, r.Old, "", func(name, v string) error {
			o.warnings = append(o.warnings, r.Message())
			return set(name, v)
		})
	}
	return fs, nil
}

// setter is how s's value is set: read and checked by its reader, then
// put in place, or in given when it has none (a handler setting).
func setter(s *settings.Setting, place any, given settings.Values) func(name, text string) error {
	if place == nil && s.JSON == "" {
		panic("--" + s.Flag + " has no place in options") // places() lacks it
	}
	return func(name, text string) error {
		v, err := s.ReadFlag(name, text)
		switch {
		case err != nil:
			return err
		case place == nil:
			given.Add(s, v)
		default:
			put(place, v, s.Read.Adds)
		}
		return nil
	}
}

// put stores a reader's value in its place (a pointer to a field of the
// value's type), or adds the value (a list) to it.
func put(place, v any, adds bool) {
	dst, val := reflect.ValueOf(place).Elem(), reflect.ValueOf(v)
	if adds {
		val = reflect.AppendSlice(dst, val)
	}
	dst.Set(val)
}

func setDefault(s *settings.Setting, set func(name, text string) error, getenv func(string) string) error {
	if s.Default != "" {
		if err := set(s.FlagName(), s.Default); err != nil {
			panic(err) // the table's default fails its own check
		}
	}
	if v := getenv(s.Env); s.Env != "" && v != "" {
		return set(s.Env, v)
	}
	return nil
}

// addFlag registers a flag named name for s; its errors name it as
// typed (the short flag when there is one).
func addFlag(fs *pflag.FlagSet, s *settings.Setting, name, short string, set func(name, text string) error) {
	typed := "--" + name
	if short != "" {
		typed = "-" + short
	}
	f := fs.VarPF(flagValue(func(v string) error { return set(typed, v) }), name, short, "")
	if s.Read.Switch {
		f.NoOptDefVal = "true" // on once named, whatever follows an =
	}
}

// flagValue is a flag's pflag.Value: it only sets.
type flagValue func(string) error

func (f flagValue) Set(v string) error { return f(v) }
func (f flagValue) String() string     { return "" }
func (f flagValue) Type() string       { return "value" }

// check holds the options to the rules between them, and makes their
// paths absolute; positional is what is left of the arguments.
func (o *options) check(positional []string, getenv func(string) string) error {
	if strings.HasPrefix(o.address, "[") && strings.HasSuffix(o.address, "]") {
		o.address = o.address[1 : len(o.address)-1] // [::1], as in a URL
	}
	if err := o.checkTLS(); err != nil {
		return err
	}
	if err := o.checkSocket(); err != nil {
		return err
	}
	if err := settings.Unmet(&o.handler, true); err != nil { // --preload without workers
		return err
	}
	if err := checkPort("port", o.port); err != nil {
		return err
	}
	if err := o.checkAdmin(getenv); err != nil {
		return err
	}
	if len(positional) > 1 {
		return fmt.Errorf("one rackup file at most, got %s", strings.Join(positional, " "))
	}
	o.rackupArg, o.rest = "config.ru", positional
	if len(positional) == 1 {
		o.rackupArg = positional[0]
	}
	return o.checkPaths(getenv)
}

// checkAdmin checks --admin-port, and reads its token.
func (o *options) checkAdmin(getenv func(string) string) error {
	if o.adminPort != "" {
		if err := checkPort("admin port", o.adminPort); err != nil {
			return err
		}
		// Caddy's listeners set SO_REUSEPORT: on one port the admin API
		// and the app would share the connections, each getting some.
		if o.adminPort == o.port && o.port != "0" && o.socket == "" {
			return fmt.Errorf("--admin-port %s is the port the app is served on", o.adminPort)
		}
	}
	var err error
	switch {
	case o.adminTokenFile != "" && o.adminPort == "":
		return errors.New("--admin-token-file is the token of --admin-port: give both")
	case o.adminTokenFile != "":
		o.adminToken, err = readAdminToken(o.adminTokenFile)
	case o.adminPort != "":
		o.adminToken = strings.TrimSpace(getenv(adminTokenEnv))
	}
	return err
}

// checkPaths makes the paths the options name absolute, and checks that
// the directories exist.
func (o *options) checkPaths(getenv func(string) string) error {
	var err error
	for _, p := range []*string{&o.pidfile, &o.adminSocket} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	if o.rackup, err = filepath.Abs(o.rackupArg); err != nil {
		return err
	}
	if o.static == "" && getenv("RAILS_SERVE_STATIC_FILES") != "" {
		if public := filepath.Join(filepath.Dir(o.rackup), "public"); isDir(public) {
			o.static = public
		}
	}
	if o.static != "" {
		if o.static, err = filepath.Abs(o.static); err != nil || !isDir(o.static) {
			return fmt.Errorf("--static: %s is not a directory", o.static)
		}
	}
	dirs := o.handler.SendfileDirs
	for i, dir := range dirs {
		if dirs[i], err = filepath.Abs(dir); err != nil || !isDir(dirs[i]) {
			return fmt.Errorf("--sendfile-dir: %s is not a directory", dir)
		}
	}
	return nil
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
