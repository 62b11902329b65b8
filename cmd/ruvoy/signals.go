package main

import (
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/ruvoy/ruvoy/internal/serve"
)

// Signals a user of Puma or Unicorn sends out of habit, beyond the ones
// Caddy takes (TERM and INT stop, QUIT quits at once, USR1 reloads a
// config file under `ruvoy run`) and the reload's (USR2 and HUP, in
// main.go); docs/cli.md lists what each does.

// resizeOnSignal has SIGTTIN add a worker to every app in cluster mode
// and SIGTTOU retire one, which finishes its requests first (never the
// last), as Puma does. In one process, or before an app serves, they are
// logged and ignored: never Go's default for them, which stops the whole
// server until SIGCONT. Installed before anything else, so that no
// moment of the start is left with that default.
func resizeOnSignal() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for sig := range signals {
			if sig == syscall.SIGTTIN {
				resize(true, "SIGTTIN")
			} else {
				resize(false, "SIGTTOU")
			}
		}
	}()
}

// resize logs at the level of the reload's lines (main.go): what an operator
// asked for, done or not, is seen in the default log.
func resize(grow bool, name string) {
	log := caddy.Log().Named("ruvoy")
	rt := serve.Current()
	if rt == nil {
		log.Warn("ruvoy: "+name+" ignored: no app serves yet", zap.String("signal", name))
		return
	}
	sizes, err := rt.ResizeWorkers(grow)
	if len(sizes) == 0 {
		log.Warn("ruvoy: "+name+" ignored: the app runs in this process, without workers (--workers N adds them)",
			zap.String("signal", name))
		return
	}
	apps := make([]string, 0, len(sizes))
	for app := range sizes {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		fields := []zap.Field{zap.String("signal", name), zap.String("rackup", app), zap.Int("workers", sizes[app])}
		switch {
		case err != nil:
			log.Warn("ruvoy: "+name+": the workers stay as they were", append(fields, zap.Error(err))...)
		case grow:
			log.Warn("ruvoy: a worker added ("+name+")", fields...)
		default:
			log.Warn("ruvoy: a worker retires ("+name+"): it finishes its requests first", fields...)
		}
	}
}
