package ruvoy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	ossignal "os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/msg"
	"github.com/ruvoy/ruvoy/internal/vm"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WorkerFDEnv names the environment variable that makes the binary a
// worker process (cluster mode): its value is the descriptor of the socket
// to the front end; the descriptor after it is the worker's urgent socket
// (wire.h, "Workers").
const WorkerFDEnv = "RUVOY_WORKER_FD"

// workerConfig is what the front end tells a worker first (RV_WORKER_CONFIG).
type workerConfig struct {
	Slot           int           `json:"slot"`
	Program        string        `json:"program"`
	Args           []string      `json:"args"`
	ResponseWindow int           `json:"response_window"`
	StallWarn      time.Duration `json:"stall_warn"`
	HoldLimit      time.Duration `json:"hold_limit"`
	Rackup         string        `json:"rackup"`
	Environment    string        `json:"environment"`
	Clusters       string        `json:"clusters"`
}

// statsEvery is how often a worker reports its figures.
const statsEvery = 500 * time.Millisecond

// urgentStopWait is how long a stop that came on the urgent socket waits for the
// same stop on the socket, which the VM thread reads unless Ruby code
// holds it.
const urgentStopWait = 250 * time.Millisecond

// relayEnd is why a worker's socket is done (RV_OUT_RELAY_END).
type relayEnd struct {
	why  uint64 // wire.Relay*
	text string
}

// RunWorker is a worker process's main: it boots the VM, loads the app
// the front end names, then hands the socket to the VM thread, which
// reads the front end's frames and writes its own (rv_relay.c), until the
// front end says stop or goes away. It returns the process's exit status
// (Runtime.Shutdown's).
func RunWorker(fd int) int {
	// Signals are the front end's: a Ctrl-C or a service manager's TERM
	// reaches every process of the group, and a worker stops when the
	// front end tells it to, after the drain.
	ossignal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
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
	var cfg workerConfig
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
	vm.RelayOpen(fd)
	fail := func(text string) int {
		vm.RelaySend(wire.WorkerReady, 0, 0, 0, []byte(text))
		vm.RelayFinish()
		return 1
	}

	rt := newRuntime(Options{Program: cfg.Program, Args: cfg.Args, ResponseWindow: cfg.ResponseWindow, Logger: log})
	rt.relay = true
	rt.relayEnd = make(chan relayEnd, 1)
	rt.relayDone = make(chan struct{})
	if err := rt.bootLocal(); err != nil {
		return fail("starting Ruby: " + err.Error())
	}
	rt.SetStallWarn(cfg.StallWarn)
	rt.SetHoldLimit(cfg.HoldLimit)
	r := rt.control(wire.InLoadApp, 0, wire.AppendLoadApp(nil, cfg.Rackup, cfg.Environment, cfg.Clusters))
	if r.result == 0 {
		return fail(r.text)
	}
	rest, _ := in.Peek(in.Buffered()) // the front end's frames that came with the settings
	if r := rt.controlFlags(wire.InRelay, uint32(r.result), uint64(fd), rest); r.result == 0 {
		return fail(r.text)
	}
	if e := vm.WatchHeld(); e < 0 {
		return fail("starting the held watch: " + syscall.Errno(-e).Error())
	}
	vm.RelaySend(wire.WorkerReady, 0, 0, 1, nil)
	go rt.reportStats()
	go rt.listenUrgent(fd + 1)

	if end := <-rt.relayEnd; end.why == wire.RelayFailed {
		log.Error("ruvoy: the socket to the front end failed: stopping", zap.String("error", end.text))
	}
	code := rt.Shutdown()
	vm.RelayFinish()
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
func (rt *Runtime) listenUrgent(fd int) {
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
			vm.Interrupt(fr.Stream, uint32(fr.Aux))
		case wire.InStop:
			time.AfterFunc(urgentStopWait, func() { rt.endRelay(relayEnd{why: wire.RelayStop}) })
		}
	}
}

func (rt *Runtime) endRelay(e relayEnd) {
	select {
	case rt.relayEnd <- e:
	default:
	}
}

// relayMsg sends a VM message to the front end from Go: what the VM sent
// before it read the socket (while the app loaded) or after (the drain
// once a stop came).
func (rt *Runtime) relayMsg(m *msg.Msg) {
	if m.Kind() == wire.OutRelayEnd {
		rt.relayOnce.Do(func() { close(rt.relayDone) })
		rt.endRelay(relayEnd{why: m.Aux(), text: string(m.Payload())})
		m.Free()
		return
	}
	vm.RelaySendMsg(m)
}

// reportStats sends the front end the worker's figures every statsEvery.
// When Ruby code holds the VM thread, the held watch says so (rv_held.c).
func (rt *Runtime) reportStats() {
	for {
		vm.RelaySend(wire.WorkerStats, 0, 0, 0, wire.AppendStats(nil, statsValues(rt.Stats(), rt.counters.stalls.Load(), processRSS(os.Getpid()))))
		time.Sleep(statsEvery)
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

// processRSS is a process's resident memory in bytes (0 if unknown).
func processRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	return statmRSS(b)
}

// statmRSS reads the resident memory, in bytes, from /proc's statm (its
// second number is in pages).
func statmRSS(b []byte) uint64 {
	var size, resident uint64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}

// processPeakRSS is the most resident memory a process had, in bytes
// (/proc's VmHWM; 0 if unknown).
func processPeakRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib uint64
			fmt.Sscan(rest, &kib)
			return kib << 10
		}
	}
	return 0
}
