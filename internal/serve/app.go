package serve

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster/frontend"

	"go.uber.org/zap"
)

// App is a loaded rackup: an http.Handler that runs requests in the VM
// (request.go follows one).
type App struct {
	rt           *Runtime
	id           uint64 // the VM's number for it; 0 in cluster mode
	opts         AppOptions
	admit        *admission
	sendfileDirs []sendfileDir
	sendfileTold atomic.Bool // unsentFile
	closed       atomic.Bool
	pool         *frontend.Pool // cluster mode: the workers it runs in; nil: this process's VM

	inflight atomic.Int64 // requests inside ServeHTTP
	lone     atomic.Int32 // requests in a row that arrived to find no other in flight
	draining atomic.Bool  // closed for unloadDelay: unload once idle
	unloaded atomic.Bool
}

// unloadDelay is how long a closed app stays in the VM. On a reload Caddy
// cleans up the old config's handlers once its old servers have begun to
// shut down, not finished: a request such a server read just before may
// reach this handler after Close, and must still find its app.
const unloadDelay = 10 * time.Second

func newApp(rt *Runtime, id uint64, o AppOptions, dirs []sendfileDir) *App {
	o = o.withDefaults()
	return &App{rt: rt, id: id, opts: o, sendfileDirs: dirs, admit: newAdmission(o, &rt.counters)}
}

// RequestsPerConnection is the most requests one HTTP/2 or HTTP/3
// connection may have in the app at once.
func (a *App) RequestsPerConnection() int { return a.opts.MaxRequestsPerConnection }

// Close drops the app: it no longer counts as serving at once, and leaves
// the VM after unloadDelay, once no request of it is in flight (requests in
// the VM hold the app themselves).
func (a *App) Close() {
	if a.closed.CompareAndSwap(false, true) {
		a.rt.apps.Add(-1)
		time.AfterFunc(unloadDelay, func() {
			a.draining.Store(true)
			a.unloadIfIdle()
		})
	}
}

func (a *App) unloadIfIdle() {
	if a.draining.Load() && a.inflight.Load() == 0 && a.unloaded.CompareAndSwap(false, true) {
		if a.pool != nil {
			go a.rt.stopPool(a.pool)
		} else {
			a.rt.vm.UnloadApp(a.id)
		}
		closeSendfileDirs(a.sendfileDirs)
	}
}

// link is the VM a new request goes to: this process's, or the worker
// that has the fewest requests in flight; false when no worker serves,
// nor began to within a few seconds.
func (a *App) link(r *http.Request) (vmLink, bool) {
	if a.pool == nil {
		return localVM{a.rt.vm}, true
	}
	w := a.pool.Pick()
	if w == nil {
		w = a.pool.Await(r)
	}
	if w != nil && a.opts.AccessLog != nil {
		a.opts.AccessLog(r, zap.Int("worker", w.Slot()))
	}
	return w, w != nil
}

func (a *App) requestDone() {
	if a.inflight.Add(-1) == 0 {
		a.unloadIfIdle()
	}
}

func (a *App) logPath(msg, path string, err error) {
	a.rt.log().Error(msg, zap.String("file", path), zap.Error(err))
}
