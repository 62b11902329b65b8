// Package worker is cluster mode's worker side: the main of a worker
// process (the binary started again by the front end, internal/cluster/
// frontend). It boots a VM, loads the app the front end names, and hands
// the socket to the VM thread, which reads the front end's frames and
// writes its own (internal/vm's rv_relay.c) until the front end says stop
// or goes away.
package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	ossignal "os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/cluster"
	"github.com/ruvoy/ruvoy/internal/host"
	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/tuning"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// urgentStopWait is how long a stop that came on the urgent socket waits for the
// same stop on the socket, which the VM thread reads unless Ruby code
// holds it.
const urgentStopWait = 250 * time.Millisecond

// relayEnd is why a worker's socket is done (RV_OUT_RELAY_END).
type relayEnd struct {
	why  uint64 // wire.Relay*
	text string
}

// relay is a worker's way to its front end, from Go: what the VM sends
// Go goes on as frames (it is the VM's host.Router), and the end of the
// socket is awaited here.
type relay struct {
	end     chan relayEnd
	endOnce sync.Once
	vm      *host.VM
}

// Run is a worker process's main: fd is its socket to the front end, and
// fd+1 its urgent socket. It returns the process's exit status (the
// runtime's Shutdown's).
func Run(fd int) int {
	// Signals are the front end's: a Ctrl-C or a service manager's TERM
	// reaches every process of the group, and a worker stops when the
	// front end tells it to, after the drain.
	// SIGQUIT (systemd's watchdog signal in docs/deployment.md's unit, to
	// the whole group unless KillMode=mixed), SIGTTIN and SIGTTOU (workers
	// added or retired) are the front end's too.
	ossignal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTTIN, syscall.SIGTTOU)
	// The worker's Go side has little to do once the VM thread relays the
	// frames (its figures, the urgent socket): one processor keeps it from
	// waking a second thread to look for work, on a core a VM thread needs.
	runtime.GOMAXPROCS(1)
	// The app's child processes must not hold the sockets.
	syscall.CloseOnExec(fd)
	syscall.CloseOnExec(fd + 1)
	// The socket stays a bare descriptor that Go reads only the settings
	// from: the VM thread reads and writes it from then on.
	in := bufio.NewReaderSize(fdReader(fd), 64<<10)
	var hdr [wire.FrameHeader]byte
	var cfg cluster.Config
	first, err := wire.ReadFrame(in, &hdr)
	if err == nil && first.Kind != wire.WorkerConfig {
		err = wire.ErrFrame
	}
	if err == nil {
		p := make([]byte, first.Len)
		if _, err = io.ReadFull(in, p); err == nil {
			err = json.Unmarshal(p, &cfg)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ruvoy worker: reading its settings: %v\n", err)
		return 1
	}
	log := workerLogger(cfg.Slot)
	rl := &relay{end: make(chan relayEnd, 1)}
	// The front end keeps the streams of a worker's requests: the VM keeps
	// room for MaxStreams, its host none.
	v := host.New(host.Config{Program: cfg.Program, Args: cfg.Args, ResponseWindow: cfg.ResponseWindow, Logger: log}, rl)
	rl.vm = v
	v.RelayOpen(fd)
	fail := func(text string) int {
		v.RelaySend(wire.WorkerReady, 0, 0, 0, []byte(text))
		v.RelayFinish()
		return 1
	}
	if err := v.Boot(); err != nil {
		return fail("starting Ruby: " + err.Error())
	}
	go tuning.ReleaseWhenIdle(v.RelayActivity, host.ReleaseMemory)
	v.SetHoldWarn(cfg.HoldWarn)
	v.SetHoldLimit(cfg.HoldLimit)
	v.SetGCWhenIdle(cfg.GCWhenIdle)
	app := v.ForkedApp() // forked from a template (--preload), which loaded it
	if app == 0 {
		var text string
		if app, text = v.LoadApp(cfg.Rackup, cfg.Environment, cfg.Upstreams); app == 0 {
			return fail(text)
		}
	}
	if text, ok := v.WorkerBoot(cfg.Slot); !ok {
		return fail(text)
	}
	early, _ := in.Peek(in.Buffered()) // the front end's frames that came with the settings
	if text, ok := v.Relay(app, fd, early); !ok {
		return fail(text)
	}
	if e := v.StartHeldReporter(); e < 0 {
		return fail("starting the held reporter: " + syscall.Errno(-e).Error())
	}
	v.RelaySend(wire.WorkerReady, 0, 0, 1, nil)
	go rl.reportStats()
	go rl.listenUrgent(fd + 1)

	if end := <-rl.end; end.why == wire.RelayFailed {
		log.Error("ruvoy: the socket to the front end failed: stopping", zap.String("error", end.text))
	}
	code, _ := v.Stop()
	v.RelayFinish()
	return code
}

// fdReader reads a descriptor with plain read(2), leaving it open: the
// VM thread takes it over.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// listenUrgent reads the worker's urgent socket: the front end's interrupts and stop,
// sent on the socket too, reach the VM here even while Ruby code holds
// its thread, which then reads nothing from the socket.
func (rl *relay) listenUrgent(fd int) {
	f := os.NewFile(uintptr(fd), "ruvoy-urgent")
	in := bufio.NewReader(f)
	var hdr [wire.FrameHeader]byte
	for {
		fr, err := wire.ReadFrame(in, &hdr)
		if err == nil && fr.Len > 0 {
			_, err = in.Discard(int(fr.Len))
		}
		if err != nil {
			return // the front end is gone: the socket says so too
		}
		switch fr.Kind {
		case wire.InInterrupt:
			rl.vm.Interrupt(fr.Stream, uint32(fr.Aux))
		case wire.InStop:
			time.AfterFunc(urgentStopWait, func() { rl.ended(relayEnd{why: wire.RelayStop}) })
		}
	}
}

// ended says the socket is done, once.
func (rl *relay) ended(e relayEnd) {
	select {
	case rl.end <- e:
	default:
	}
}

// Route sends the VM's messages to the front end from Go: what the VM
// sent before it read the socket (while the app loaded) or after (the
// drain once a stop came). The VM's RV_OUT_RELAY_END says its socket is
// done.
func (rl *relay) Route(m *msg.Msg) {
	for m != nil {
		next := m.Next()
		m.SetNext(nil)
		if m.Kind() == wire.OutRelayEnd {
			rl.endOnce.Do(rl.vm.RelayEnded)
			rl.ended(relayEnd{why: m.Aux(), text: string(m.Payload())})
			m.Free()
		} else {
			rl.vm.RelaySendMsg(m)
		}
		m = next
	}
}

// Describe names no request: the front end keeps them, and names them in
// what the worker's VM logs.
func (rl *relay) Describe(uint64) (string, string, bool) { return "", "", false }

// reportStats sends the front end the worker's figures every
// cluster.StatsEvery, whatever the app does: the front end takes a
// silent worker for stopped. When Ruby code holds the VM thread, the held
// watch says so too (rv_held.c).
func (rl *relay) reportStats() {
	for {
		s := rl.vm.Stats()
		s.RSS = cluster.ProcessRSS(os.Getpid())
		rl.vm.RelaySend(wire.WorkerStats, 0, 0, 0, s.Append(nil))
		time.Sleep(cluster.StatsEvery)
	}
}

// workerLogger writes a worker's own log entries (the Go side's; its VM's
// go to the front end) as JSON lines on stderr, which it shares with the
// front end.
func workerLogger(slot int) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stderr), zap.InfoLevel)
	return zap.New(core).Named("ruvoy.worker").With(zap.Int("worker", slot), zap.Int("pid", os.Getpid()))
}
