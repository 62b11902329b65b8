package serve

import (
	"errors"
	"net/http"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/cluster/frontend"
)

// Cluster mode, from the request path's side: an app's pool of worker
// processes (internal/cluster/frontend) is a VM like this process's own to
// its requests; what the workers send comes back through the router
// (route.go), as what the local VM sends does.

// startPool starts the worker processes of an app (o.Workers of them),
// which load rackup.
func (rt *Runtime) startPool(o AppOptions, rackup, environment, upstreams string) (*frontend.Pool, error) {
	var template []byte // what a template boots with, with --preload
	window := rt.vm.ResponseWindow()
	if o.ResponseWindow > 0 {
		window = int(o.ResponseWindow)
	}
	if o.Preload {
		template = rt.vm.TemplateSettings(window, rackup, environment, upstreams)
	}
	p, err := frontend.Start(frontend.Config{
		Workers: o.Workers,
		MaxRSS:  uint64(max(o.WorkerMaxRSS, 0)),
		Timeout: o.WorkerTimeout,
		Worker: cluster.Config{Program: rt.vm.Program(), Args: rt.vm.Args(), ResponseWindow: window,
			HoldWarn: rt.vm.HoldWarn(), HoldLimit: rt.vm.HoldLimit(), GCWhenIdle: o.GCWhenIdle,
			Rackup: rackup, Environment: environment, Upstreams: upstreams},
		Template: template,
		Router:   (*router)(rt),
		Logger:   rt.log,
	})
	if err != nil {
		var boot *frontend.BootError
		if errors.As(err, &boot) {
			return nil, rt.bootFailed(rackup, boot.Message)
		}
		return nil, err
	}
	rt.poolsMu.Lock()
	rt.pools[p] = struct{}{}
	rt.poolsMu.Unlock()
	rt.releaseWhenIdle()
	return p, nil
}

// stopPool stops an unloaded app's workers.
func (rt *Runtime) stopPool(p *frontend.Pool) int {
	code := p.Stop()
	rt.poolsMu.Lock()
	delete(rt.pools, p)
	rt.poolsMu.Unlock()
	return code
}

// poolList is the pools of the apps not yet unloaded, at this moment.
func (rt *Runtime) poolList() []*frontend.Pool {
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	pools := make([]*frontend.Pool, 0, len(rt.pools))
	for p := range rt.pools {
		pools = append(pools, p)
	}
	return pools
}

// RestartWorkers restarts the workers of every app in cluster mode (see
// frontend.Pool.Restart) and reports whether there were any; a boot error
// leaves the old workers serving.
func (rt *Runtime) RestartWorkers() (bool, error) {
	pools := rt.poolList()
	for _, p := range pools {
		if err := p.Restart(); err != nil {
			var boot *frontend.BootError
			if errors.As(err, &boot) {
				return true, rt.bootFailed(p.Rackup(), boot.Message)
			}
			return true, err
		}
	}
	return len(pools) > 0, nil
}

// ResizeWorkers adds a worker to every app in cluster mode (grow) or
// retires one, which finishes its requests first (shrink; never the last
// one), and returns how many workers each has now, by its rackup; none
// in one process. An app whose new worker failed to boot keeps the
// workers it had (the error says why).
func (rt *Runtime) ResizeWorkers(grow bool) (map[string]int, error) {
	sizes := map[string]int{}
	var first error
	for _, p := range rt.poolList() {
		resize := p.Shrink
		if grow {
			resize = p.Grow
		}
		n, err := resize()
		sizes[p.Rackup()] = n
		if err != nil && first == nil {
			var boot *frontend.BootError
			if errors.As(err, &boot) {
				err = rt.bootFailed(p.Rackup(), boot.Message)
			}
			first = err
		}
	}
	return sizes, first
}

// stopPools stops every pool (the process is exiting).
func (rt *Runtime) stopPools() int {
	pools := rt.poolList()
	codes := make(chan int, len(pools))
	for _, p := range pools {
		go func() { codes <- rt.stopPool(p) }()
	}
	code := 0
	for range pools {
		code = max(code, <-codes)
	}
	return code
}

// eachWorker calls f with every slot of every pool: the worker serving
// it (nil while one starts) and the restarts of the slot.
func (rt *Runtime) eachWorker(f func(slot int, w *frontend.Handle, restarts int64)) {
	for _, p := range rt.poolList() {
		p.Each(f)
	}
}

// noWorker answers a request that found no worker serving, nor one that
// began to within a few seconds (all of them restarting).
func noWorker(w http.ResponseWriter, r *http.Request) {
	w.Header()["Retry-After"] = []string{"1"}
	refuse(w, r, http.StatusServiceUnavailable)
}
