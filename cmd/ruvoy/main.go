// Command ruvoy serves a Rack app: `ruvoy [options] [config.ru]`. It is also
// Caddy with the ruvoy module built in: `ruvoy run --config Caddyfile`,
// `ruvoy reload`, `ruvoy list-modules` and every other Caddy subcommand work.
package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"go.uber.org/zap"

	_ "github.com/ruvoy/ruvoy/caddy"
	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
	"github.com/ruvoy/ruvoy/internal/cluster/worker"
	"github.com/ruvoy/ruvoy/internal/host"
	"github.com/ruvoy/ruvoy/internal/serve"
	"github.com/ruvoy/ruvoy/lib"
)

func main() {
	if fd := os.Getenv(cluster.FDEnv); fd != "" {
		// A worker process of a ruvoy serving in cluster mode.
		n, err := strconv.Atoi(fd)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ruvoy: %s=%q is not a descriptor\n", cluster.FDEnv, fd)
			os.Exit(2)
		}
		os.Unsetenv(cluster.FDEnv) // not for the app's child processes
		os.Exit(worker.Run(n))
	}
	// PID 1 (a container's first process): the orphans of the whole pid
	// namespace are this process's to wait for.
	frontend.ReapAsInit()
	if len(os.Args) == 2 {
		switch os.Args[1] {
		case "help": // Caddy's own help names caddy, not ruvoy's options
			fmt.Print(usage())
			fmt.Print("\nCaddy's commands: ruvoy help COMMAND (e.g. ruvoy help run).\n")
			return
		case "version":
			os.Exit(serveApp([]string{"--version"}))
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "reload" && !slices.Contains(os.Args, "--force") {
		// Caddy skips a reload whose config is unchanged, but a ruvoy
		// reload is most often for the app's code: the rackup is built
		// again whatever the config.
		os.Args = append(os.Args, "--force")
	}
	if len(os.Args) > 1 {
		if _, ok := caddycmd.Commands()[os.Args[1]]; ok || os.Args[1] == "help" {
			if os.Args[1] == "run" {
				keepSysmonAwake() // a server under a config of one's own
				resizeOnSignal()
			}
			caddycmd.Main()
			return
		}
	}
	keepSysmonAwake()
	resizeOnSignal()
	os.Exit(serveApp(os.Args[1:]))
}

func versionLine() string {
	caddyVersion, _ := caddy.Version()
	return fmt.Sprintf("ruvoy %s (ruby %s, caddy %s)", lib.Version, host.RubyVersion(), caddyVersion)
}

// serveApp runs the default command: serve one rackup with a generated config.
func serveApp(args []string) int {
	opts, err := parseOptions(args, os.Getenv)
	if errors.Is(err, errHelp) {
		fmt.Print(usage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy: %v\n%s", err, usageHint)
		return 2
	}
	for _, w := range opts.warnings {
		fmt.Fprintf(os.Stderr, "ruvoy: %s\n", w)
	}
	if opts.version {
		fmt.Println(versionLine())
		fmt.Printf("built for Ruby ABI %s; running libruby %s (%s)\n", host.BuiltABI(), host.RubyVersion(), host.RubyPlatform())
		return 0
	}
	if !opts.printConfig {
		if err := prepareAdmin(opts); err != nil {
			fmt.Fprintf(os.Stderr, "ruvoy: %v\n", err)
			return 1
		}
		if opts.adminDir != "" {
			defer os.RemoveAll(opts.adminDir) // a start that fails; a stop removes it too (caddy.OnExit)
		}
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy: %v\n", err)
		return 2
	}
	if opts.printConfig {
		fmt.Println(string(cfg))
		return 0
	}
	if _, err := os.Stat(opts.rackup); err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy: no rackup file at %s\n", opts.rackup)
		return 1
	}
	if err := checkPortFree(opts); err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy: %v\n", err)
		return 1
	}
	os.Setenv("RACK_ENV", opts.handler.Environment)
	// The server serves the app and --static's files, both of which the
	// runtime sees: Go's processors may follow their load (procs.go).
	rt := serve.Start(serve.Options{Program: os.Args[0], Args: opts.rest, ProcsByLoad: true})
	con := newConsole(os.Stdout)
	rt.SetConsole(con.log, railsExit())
	sd := newSDNotify(rt, opts.rackupArg, os.Getenv) // nil unless systemd's NOTIFY_SOCKET is set
	sd.booting(opts.handler.Workers)
	caddy.TrapSignals()
	announceStop(rt, sd, opts.drainDelay, opts.grace)
	if err := caddy.Load(cfg, true); err != nil {
		// Ruby's error first: Caddy's chain of what it was provisioning
		// says nothing a user needs.
		if boot := rt.LastBootError(); boot != nil {
			fmt.Fprintf(os.Stderr, "ruvoy: %s failed to load: %s", opts.rackupArg, boot.Message)
		} else {
			fmt.Fprintf(os.Stderr, "ruvoy: %v\n", err)
		}
		return 1
	}
	if err := serveAdminPort(opts); err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy: %v\n", err)
		return 1
	}
	listeners := served(opts)
	if opts.port == "0" && opts.socket == "" {
		opts.port = boundPort(opts.port)
	}
	if opts.pidfile != "" {
		if err := caddy.PIDFile(opts.pidfile); err != nil { // Caddy removes it as it exits
			fmt.Fprintf(os.Stderr, "ruvoy: --pidfile: %v\n", err)
			return 1
		}
	}
	caddyVersion, _ := caddy.Version()
	con.serving(banner{version: lib.Version, ruby: host.RubyVersion(), caddy: caddyVersion,
		rackup: opts.rackupArg, url: opts.url(), environment: opts.handler.Environment, pid: os.Getpid(),
		workers: opts.handler.Workers, preload: opts.handler.Preload, listeners: listeners})
	sd.serving()
	reloadOnSignal(cfg, rt, sd, opts.handler.Workers > 0)
	return 0 // not reached: signals end the process (caddy.TrapSignals)
}

// reloadOnSignal reloads the app on SIGUSR2 or SIGHUP, forever: in
// cluster mode new workers boot with the app's code as it is now and the
// old ones stop once their requests end, while the server and its
// connections stay; in one process the config is loaded again and the
// rackup parsed again in the same VM (docs/cli.md). A rackup that fails
// to load leaves the running app serving. systemd hears RELOADING=1
// before and READY=1 after (sd; Caddy's own pair comes only with a
// config load).
func reloadOnSignal(cfg []byte, rt *serve.Runtime, sd *sdNotify, workers bool) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR2, syscall.SIGHUP)
	for sig := range signals {
		log := caddy.Log().Named("ruvoy")
		log.Warn("ruvoy: reloading the app", zap.String("signal", sig.String()))
		sd.reloading(signalName(sig), workers)
		restarted, err := rt.RestartWorkers()
		if !restarted {
			err = caddy.Load(cfg, true)
		}
		sd.reloaded(err != nil)
		if err != nil {
			if boot := rt.LastBootError(); boot != nil {
				err = boot
			}
			log.Error("ruvoy: the reload failed: the app as it was goes on serving", zap.Error(err))
			continue
		}
		log.Warn("ruvoy: reloaded")
	}
}

// signalName names a reload signal as systemctl and kill do.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGHUP {
		return "SIGHUP"
	}
	return "SIGUSR2"
}

// boundPort is the port the server listens on (-p 0 lets the kernel pick
// one), or fallback when it cannot be told.
func boundPort(fallback string) string {
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		return fallback
	}
	for _, srv := range app.(*caddyhttp.App).Servers {
		for _, l := range srv.Listeners() {
			if a, ok := l.Addr().(*net.TCPAddr); ok {
				return strconv.Itoa(a.Port)
			}
		}
	}
	return fallback
}

// served is every address the running config listens on, as the banner
// lists them: a URL, and the protocols where they are not plain HTTP/1.1.
func served(o *options) []string {
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		return []string{o.url()}
	}
	servers := app.(*caddyhttp.App).Servers
	names := slices.Sorted(maps.Keys(servers))
	if i := slices.Index(names, "ruvoy"); i > 0 { // the app's server first
		names = append([]string{"ruvoy"}, slices.Delete(names, i, i+1)...)
	}
	var out []string
	for _, name := range names {
		srv := servers[name]
		tls := len(srv.TLSConnPolicies) > 0
		for _, l := range srv.Listeners() {
			var url string
			switch a := l.Addr().(type) {
			case *net.TCPAddr:
				url = map[bool]string{true: "https://", false: "http://"}[tls] + a.String()
			case *net.UnixAddr:
				url = "unix://" + a.Name
			default:
				url = l.Addr().String()
			}
			var notes []string
			switch {
			case name != "ruvoy":
				notes = append(notes, "redirects to HTTPS") // automatic HTTPS's port 80
			case tls:
				notes = append(notes, "HTTP/1.1, HTTP/2")
			case o.h2c:
				notes = append(notes, "HTTP/1.1, h2c")
			}
			if strings.HasPrefix(o.socket, "fd/") {
				notes = append(notes, o.socket)
			}
			out = append(out, withNotes(url, notes))
			if tls && name == "ruvoy" && slices.Contains(srv.Protocols, "h3") {
				out = append(out, withNotes(url, []string{"HTTP/3, UDP"}))
			}
		}
	}
	if len(out) == 0 {
		return []string{o.url()}
	}
	return out
}

func withNotes(url string, notes []string) string {
	if len(notes) == 0 {
		return url
	}
	return url + " (" + strings.Join(notes, "; ") + ")"
}

// railsExit is what runs after the stop's last line: under `rails server`
// (the Rack handler sets RUVOY_RAILS_SERVER, lib/ruvoy/rack_handler.rb),
// Rails' own last line, which Rails prints once its server returns; the
// handler replaced the process with this one, so this one prints it.
func railsExit() func() {
	if os.Getenv(railsServerEnv) == "" {
		return nil
	}
	os.Unsetenv(railsServerEnv) // not for the app's child processes
	return func() { fmt.Println("Exiting") }
}

// railsServerEnv marks a ruvoy that `rails server -u ruvoy` started.
const railsServerEnv = "RUVOY_RAILS_SERVER"

// checkPortFree refuses a port, or an admin port, another process serves.
// Caddy's listeners set SO_REUSEPORT, so without this a second ruvoy on
// the same port would start silently and share the connections with the
// first (a stale process serving old code); --reuse-port asks for exactly
// that, for an overlapping restart.
func checkPortFree(o *options) error {
	// The admin API is never shared, --reuse-port or not: another
	// process's would answer some of this one's admin requests.
	if o.adminPort != "" && o.adminPort != "0" {
		if addr := "127.0.0.1:" + o.adminPort; inUse(addr) {
			return fmt.Errorf("--admin-port: %w", portInUse(addr))
		}
	}
	if o.reusePort || o.port == "0" || o.socket != "" {
		return nil // a unix socket in use makes Caddy fail clearly
	}
	for _, addr := range o.listens() {
		if inUse(addr) {
			return portInUse(addr)
		}
	}
	return nil // other errors: Caddy reports them as it listens
}

// inUse says whether another socket listens on addr.
func inUse(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		l.Close()
	}
	return errors.Is(err, syscall.EADDRINUSE)
}
