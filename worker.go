package ruvoy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"github.com/ruvoy/ruvoy/internal/vm"
	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WorkerFDEnv names the environment variable that makes the binary a
// worker process (cluster mode): its value is the descriptor of the socket
// to the front end.
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

// heldAfter is how long Ruby code may hold a worker's VM thread before
// the front end stops sending that worker new requests.
const heldAfter = 10 * time.Millisecond

// statsEvery is how often a worker reports its figures.
const statsEvery = 500 * time.Millisecond

// RunWorker is a worker process's main: it boots the VM, loads the app
// the front end names, then hands the VM the front end's frames and sends
// back the VM's messages, until the front end says stop or goes away. It
// returns the process's exit status (Runtime.Shutdown's).
func RunWorker(fd int) int {
	// Signals are the front end's: a Ctrl-C or a service manager's TERM
	// reaches every process of the group, and a worker stops when the
	// front end tells it to, after the drain.
	ossignal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	syscall.CloseOnExec(fd) // the app's child processes must not hold the socket
	f := os.NewFile(uintptr(fd), "ruvoy-front-end")
	c, err := net.FileConn(f)
	f.Close()
	conn, ok := c.(*net.UnixConn)
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "ruvoy worker: descriptor %d is not the front end's socket: %v\n", fd, err)
		return 1
	}
	fr := newFrameReader(conn) // hijacked connections arrive as descriptors
	in := bufio.NewReaderSize(fr, 64<<10)
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
	out := newFrameWriter(conn)
	fail := func(text string) int {
		out.send(wire.WorkerReady, 0, 0, 0, []byte(text))
		out.finish()
		return 1
	}

	rt := newRuntime(Options{Program: cfg.Program, Args: cfg.Args, ResponseWindow: cfg.ResponseWindow, Logger: log})
	rt.relay = out
	if err := rt.bootLocal(); err != nil {
		return fail("starting Ruby: " + err.Error())
	}
	rt.SetStallWarn(cfg.StallWarn)
	rt.SetHoldLimit(cfg.HoldLimit)
	r := rt.control(wire.InLoadApp, 0, wire.AppendLoadApp(nil, cfg.Rackup, cfg.Environment, cfg.Clusters))
	if r.result == 0 {
		return fail(r.text)
	}
	app := r.result
	out.send(wire.WorkerReady, 0, 0, 1, nil)
	go rt.reportTo(out)

	p := make([]byte, 0, 64<<10)
	for {
		f, err := wire.ReadFrame(in, &hdr)
		if err == nil && int(f.Len) > cap(p) {
			p = make([]byte, 0, f.Len)
		}
		if err == nil {
			p = p[:f.Len]
			_, err = io.ReadFull(in, p)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				log.Error("ruvoy: reading from the front end failed: stopping", zap.Error(err))
			}
			break // the front end is gone: stop as it would have asked
		}
		switch f.Kind {
		case wire.InRequest:
			rt.counters.admitted.Add(1) // for the idle release (release.go)
			if rt.inflight.Add(1) == 1 {
				signal(rt.busy)
			}
			vm.Submit(wire.InRequest, f.Stream, f.Flags, app, p)
		case wire.InCancel:
			vm.Cancel(f.Stream, f.Flags)
		case wire.InInterrupt:
			vm.Interrupt(f.Stream, uint32(f.Aux))
		case wire.InHijacked:
			if f.Flags&wire.FlagFailed != 0 {
				vm.Submit(f.Kind, f.Stream, f.Flags, 0, p)
			} else if fd := fr.takeFD(); fd >= 0 {
				vm.Submit(f.Kind, f.Stream, f.Flags, uint64(fd), nil)
			} else {
				vm.Submit(f.Kind, f.Stream, wire.FlagFailed, 0, []byte("its descriptor was lost on the way to the worker"))
			}
		case wire.InStop:
			goto stop
		default:
			vm.Submit(f.Kind, f.Stream, f.Flags, f.Aux, p)
		}
	}
stop:
	code := rt.Shutdown()
	out.finish()
	return code
}

// relayMsg adds a VM message to the frames for the front end (a
// worker's dispatch, which flushes them once it has taken its inbox).
func (rt *Runtime) relayMsg(m *vm.Msg) {
	if m.Flags()&wire.FlagFinal != 0 {
		rt.inflight.Add(-1)
	}
	if m.Kind() == wire.OutFile {
		if _, fd, _, _, ok := wire.ResponseStart(m.Payload()); ok && fd >= 0 {
			rt.relay.addFile(m.Kind(), m.Stream(), m.Flags(), m.Aux(), m.Payload(), int(fd))
			m.Free()
			return
		}
	}
	rt.relay.add(m.Kind(), m.Stream(), m.Flags(), m.Aux(), m.Payload())
	m.Free()
}

// reportTo sends the front end the worker's figures every statsEvery, and
// says at once when Ruby code holds the VM thread past heldAfter (and when
// it lets go), so that new requests go to other workers meanwhile. It
// looks every few milliseconds only while requests are in flight.
func (rt *Runtime) reportTo(out *frameWriter) {
	held := false
	nextStats := time.Now()
	for {
		if rt.inflight.Load() == 0 && !held {
			select {
			case <-rt.busy:
			case <-time.After(time.Until(nextStats)):
			}
		} else {
			time.Sleep(heldAfter / 2)
		}
		s := rt.Stats()
		if now := s.RunningFor > heldAfter; now != held {
			held = now
			var aux uint64
			if held {
				aux = 1
			}
			out.send(wire.WorkerHeld, 0, 0, aux, nil)
		}
		if time.Now().After(nextStats) {
			nextStats = time.Now().Add(statsEvery)
			out.send(wire.WorkerStats, 0, 0, 0, wire.AppendStats(nil, statsValues(s, rt.counters.stalls.Load(), processRSS(os.Getpid()))))
		}
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
	var size, resident uint64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}
