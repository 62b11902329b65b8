package settings

// Table is every setting, in --help's order. A new one takes an entry
// here, the code that uses it, and the docs (docs/architecture.md says
// which files; the tests hold them to this table).
var Table = []Setting{
	{Flag: "port", Short: "p", Arg: "PORT", Read: word, Default: "8080", Env: "PORT",
		Help: "Listen on PORT (default 8080, or $PORT when set)"},
	{Flag: "address", Short: "a", Arg: "ADDRESS", Read: word, Default: "127.0.0.1",
		Help: "Bind to ADDRESS (default 127.0.0.1); localhost binds 127.0.0.1 and ::1; unix:///PATH listens on " +
			"a unix socket (mode 0660; unix:///PATH|0666 to choose), fd/N on descriptor N (systemd socket activation)"},
	{Flag: "environment", Short: "e", Arg: "ENV", JSON: "environment", Read: word, Default: "development", Env: "RACK_ENV",
		Help: "RACK_ENV for the app (default: $RACK_ENV, else development)"},
	{JSON: "rackup", Read: path}, // the command line's is its argument
	{Flag: "workers", Short: "w", Arg: "N", JSON: "workers", Read: workers, Env: "WEB_CONCURRENCY",
		Help: "Run the app in N worker processes, one VM each, behind this one (cluster mode); auto: one per core " +
			"(default: $WEB_CONCURRENCY, else 0: the app runs in this process)"},
	{Flag: "worker-max-rss", Arg: "MIB", JSON: "worker_max_rss_bytes", Read: mebibytes,
		Help: "Replace a worker whose memory grows past MIB (checked as its requests end; cluster mode; default: never)"},
	{Flag: "worker-timeout", Arg: "SECONDS", JSON: "worker_timeout", Read: seconds,
		Help: "Kill a worker that has not reported for SECONDS (stopped, frozen), answering its requests 504, " +
			"or has not loaded the app in 4x SECONDS; a new one takes its place (default 30)"},
	{Flag: "preload", JSON: "preload", Read: on, Needs: "workers", Why: "forks workers",
		Help: "Boot the app once and fork the workers from it: they share its memory (cluster mode; the app must be fork-safe)"},
	{Flag: "tls-cert", Arg: "FILE", Read: path,
		Help: "Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN, and HTTP/3 on the same port) with this certificate (PEM)"},
	{Flag: "tls-key", Arg: "FILE", Read: path,
		Help: "The certificate's key (PEM), with --tls-cert"},
	{Flag: "tls-client-ca", Arg: "FILE", Read: path,
		Help: `Ask clients for certificates signed by this CA (PEM); the app sees a verified one in env["ruvoy.context"]`},
	{Flag: "tls-internal", Read: on,
		Help: "Serve HTTPS with a certificate from Caddy's own local CA"},
	{Flag: "domain", Arg: "NAME", Read: word,
		Help: "Serve NAME over HTTPS on :443 with a certificate from Let's Encrypt (automatic HTTPS; needs a public DNS name)"},
	{Flag: "h2c", Read: on,
		Help: "Also accept cleartext HTTP/2 (by prior knowledge)"},
	{Flag: "context", JSON: "context", Read: feature,
		Help: `Give the app env["ruvoy.context"] (connection, TLS, route)`},
	{Flag: "upstream", Arg: "NAME=URL[,URL...]", JSON: "upstream", Read: upstreams,
		Help: `Define an upstream the app may call through env["ruvoy.upstream"] (repeatable; http:// or https://)`},
	{Flag: "static", Arg: "DIR", Read: path,
		Help: "Serve files that exist under DIR from Caddy's file server, without Ruby (with RAILS_SERVE_STATIC_FILES " +
			"set: the app's public/); dotfiles and symlinks out of DIR go to the app instead"},
	{Flag: "sendfile-dir", Arg: "DIR", JSON: "sendfile_dirs", Read: dirs,
		Help: "Let X-Sendfile / X-Accel-Redirect response headers name files under DIR, which Go then sends (repeatable)"},
	{Flag: "trusted-proxies", Arg: "CIDR[,CIDR...]", Read: cidrs,
		Help: "Peers whose X-Forwarded-* headers are believed (default: none; from others those headers are dropped); " +
			"the client is the rightmost X-Forwarded-For address that is not one of them"},
	{Flag: "max-body-bytes", Arg: "N", JSON: "max_body_bytes", Read: size(0, "a number of bytes"),
		Help: "Refuse request bodies over N bytes with 413 (default: no limit)"},
	{Flag: "max-requests", Arg: "N", JSON: "max_requests", Read: count(1, ""),
		Help: "Admit at most N requests to Ruby at once; more get 503 (default 1024)"},
	{Flag: "queue-timeout", Arg: "MS", JSON: "queue_timeout", Read: millis,
		Help: "Let a request over --max-requests wait MS for a place (default 0)"},
	{Flag: "max-requests-per-connection", Arg: "N", JSON: "max_requests_per_connection", Read: count(1, ""),
		Help: "Admit at most N requests of one HTTP/2 or HTTP/3 connection to Ruby at once; more wait for one of " +
			"them to end (default 100, or a quarter of --max-requests when that is less)"},
	{Flag: "max-requests-per-client", Arg: "N", JSON: "max_requests_per_client", Read: count(1, ""),
		Help: "Admit at most N requests of one client address (IPv6: its /64; behind --trusted-proxies, the address " +
			"they forward) to Ruby at once, over all its connections; more are refused as over --max-requests " +
			"(default: a quarter of --max-requests, at least 64)"},
	{Flag: "write-timeout", Arg: "SECONDS", Read: secondsFrom0("a number of seconds (0: never)"), Default: "30",
		Help: "Cut a response whose client takes none of it for SECONDS (a write of up to 64 KiB that does not " +
			"finish); 0: never (default 30)"},
	{Flag: "max-inflight-body-bytes", Arg: "N", JSON: "max_inflight_body_bytes", Read: size(1, ""),
		Help: "Hold at most N request body bytes in memory across requests; a request that would pass it gets 503 " +
			"(default 67108864)"},
	{JSON: "request_window", Read: size(0, "")},
	{JSON: "response_window", Read: size(0, "")},
	{Flag: "hold-warn", Arg: "MS", JSON: "hold_warn", Read: millis,
		Help: "Warn (with the Ruby backtrace) when a request holds the VM thread over MS without yielding " +
			"(default 100; 0: off)"},
	{Flag: "request-timeout", Arg: "SECONDS", JSON: "request_timeout", Read: seconds,
		Help: "Raise Ruvoy::RequestTimeout in a request that runs longer, answering 503 (default: none)"},
	{Flag: "vm-hold-limit", Arg: "SECONDS", JSON: "vm_hold_limit", Read: seconds,
		Help: "Exit (status 4) when Ruby code holds the VM thread this long without yielding, for a supervisor " +
			"to restart (default: never)"},
	{Flag: "gc-when-idle", Arg: "MS", JSON: "gc_when_idle", Read: millis,
		Help: "Once no request has been in flight for MS, run the minor GC Ruby would run in the next request; " +
			"a request that comes meanwhile waits for it (default: off)"},
	{Flag: "min-upload-rate", Arg: "BYTES", Read: count(0, ""), Default: "1024",
		Help: "Answer 408 to request bodies that arrive slower than BYTES a second, after a first minute " +
			"(default 1024; 0: off)"},
	{Flag: "grace", Arg: "SECONDS", Read: wholeSeconds, Default: "10",
		Help: "On SIGTERM/SIGINT, let requests finish for up to SECONDS (default 10; 0: without a limit)"},
	{Flag: "health-path", Arg: "PATH", Read: urlPath,
		Help: "Answer PATH on the serving port from Go, for load balancers: 200 while serving; 503 before the app " +
			"has booted, while stopping, and when Ruby code has held the VM thread 30 s (default: none)"},
	{Flag: "drain-delay", Arg: "SECONDS", Read: secondsFrom0("a number of seconds"),
		Help: "On SIGTERM/SIGINT, serve on for SECONDS, with --health-path answering 503, before taking no " +
			"new connections (default 5 with --health-path, else 0)"},
	{Flag: "pidfile", Arg: "FILE", Read: path, Alias: "pid", // Puma's name
		Help: "Write the process id to FILE once serving (removed on exit)"},
	{Flag: "reuse-port", Read: on,
		Help: "Share the port with a process already serving it (an overlapping restart); without it ruvoy " +
			"refuses a port that is in use"},
	{Flag: "compress", Read: on,
		Help: "Compress text responses (zstd or gzip, as the client accepts)"},
	{Flag: "early-hints-http1", JSON: "early_hints_http1", Read: on,
		Help: "Send the app's 103 Early Hints to HTTP/1.1 clients too (default: only over HTTP/2 and HTTP/3, " +
			"where browsers act on them)"},
	{Flag: "access-log", Read: on,
		Help: "Log every request, to stdout: Caddy's entries, as text on a terminal and JSON lines otherwise"},
	{Flag: "access-log-format", Arg: "FORMAT", Read: oneOf("json", "common"),
		Help: "Log every request, to stdout, as common (a line as Rack::CommonLogger writes it) or json " +
			"(JSON lines, always)"},
	{Flag: "filter-parameters", Arg: "NAME[,NAME...]", Read: names,
		Default: "passw,secret,token,_key,crypt,salt,certificate,otp,ssn", // a new Rails app's
		Help: "Log [FILTERED] for query parameters whose names contain one of these " +
			"(default: passw,secret,token,_key,crypt,salt,certificate,otp,ssn, as a new Rails app filters)"},
	{Flag: "admin-port", Arg: "PORT", Read: word,
		Help: "Serve /metrics, /ruvoy/ready and /ruvoy/health on 127.0.0.1:PORT, and the rest of Caddy's admin " +
			`API (config, /load, /stop, pprof) to requests with the admin token ("Authorization: Bearer TOKEN")`},
	{Flag: "admin-token-file", Arg: "FILE", Read: path,
		Help: "The admin token: FILE's first line (default: $RUVOY_ADMIN_TOKEN, else one made at start and printed once)"},
	{Flag: "admin-socket", Arg: "PATH", Read: path,
		Help: "Serve Caddy's whole admin API, without a token, on the unix socket PATH, mode 0600: the server's " +
			"user only (ruvoy reload and ruvoy stop --address unix/PATH)"},
	{Flag: "print-config", Read: on,
		Help: "Print the generated Caddy JSON configuration and exit"},
	{Flag: "version", Short: "v", Read: on,
		Help: "Print versions (ruvoy, ruby, caddy, the Ruby ABI built for) and exit"},
	{Flag: "help", Short: "h", // pflag's own: it answers ErrHelp
		Help: "Print this usage and exit"},
}
