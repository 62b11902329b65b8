package frontend

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ruvoy/ruvoy/internal/wire"
)

// TemplateFDEnv names the environment variable that makes the binary a
// template process (--preload; internal/vm's rv_template.c): its value is
// the descriptor of its socket to the front end.
const TemplateFDEnv = "RUVOY_TEMPLATE_FD"

// A template is the process that booted the app once (--preload) and
// forks the workers, which share its memory until they write it. Only the
// pool's forkWorker uses it, one order at a time.
type template struct {
	conn    *net.UnixConn
	cmd     *exec.Cmd
	waited  chan struct{} // closed once it has exited (cmd.ProcessState set)
	timeout time.Duration // for a fork
}

// startTemplate starts a template with its settings and returns once its
// app has loaded: a *BootError when it failed to.
func startTemplate(settings []byte, bootTimeout, forkTimeout time.Duration) (*template, error) {
	// A worker is forked twice, so that it is orphaned: this process takes
	// it up and waits for it as for a worker it started.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("ruvoy: --preload: taking up the forked workers (PR_SET_CHILD_SUBREAPER): %w", err)
	}
	reapOrphans(5 * time.Second)
	conn, theirs, err := socketPair("ruvoy: the template's socket")
	if err != nil {
		return nil, err
	}
	// Its title is long: a worker writes its own over it (rv_fork.c).
	cmd, err := startSelf("ruvoy: template, forks the workers", TemplateFDEnv+"=3", theirs)
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ruvoy: starting the template: %w", err)
	}
	t := &template{conn: conn, cmd: cmd, waited: make(chan struct{}), timeout: forkTimeout}
	go func() {
		cmd.Wait()
		waited(cmd.Process.Pid)
		close(t.waited)
	}()
	app, text, err := t.ask(wire.AppendFrame(nil, wire.TemplateBoot, 0, 0, 0, settings), nil, bootTimeout)
	if err != nil || app == 0 {
		t.stop()
		if err != nil {
			return nil, fmt.Errorf("ruvoy: the template did not load the app: %w", err)
		}
		return nil, &BootError{Message: text}
	}
	return t, nil
}

// ask sends a frame (with descriptors) and reads the reply's aux and text.
func (t *template) ask(frame, rights []byte, timeout time.Duration) (uint64, string, error) {
	t.conn.SetDeadline(time.Now().Add(timeout))
	defer t.conn.SetDeadline(time.Time{})
	if _, _, err := t.conn.WriteMsgUnix(frame, rights, nil); err != nil {
		return 0, "", err
	}
	var hdr [wire.FrameHeader]byte
	f, err := wire.ReadFrame(t.conn, &hdr)
	if err == nil && f.Kind != wire.TemplateReply {
		err = wire.ErrFrame
	}
	if err != nil {
		if err == io.EOF { // it exited: its status, once its waiter has it
			select {
			case <-t.waited:
				err = fmt.Errorf("it exited (%v)", t.cmd.ProcessState)
			case <-time.After(time.Second):
				err = errors.New("it closed its socket")
			}
		}
		return 0, "", err
	}
	text := make([]byte, f.Len)
	if _, err := io.ReadFull(t.conn, text); err != nil {
		return 0, "", err
	}
	return f.Aux, string(text), nil
}

// fork has the template fork the worker of slot, with its two sockets.
func (t *template) fork(slot int, sock, urgent *os.File) (*os.Process, error) {
	rights := unix.UnixRights(int(sock.Fd()), int(urgent.Fd()))
	// Registered before the reaper may see it: it may exit at once.
	childrenMu.Lock()
	defer childrenMu.Unlock()
	pid, text, err := t.ask(wire.AppendFrame(nil, wire.TemplateFork, 0, uint32(slot), 0, nil), rights, t.timeout)
	if err != nil {
		t.kill() // a template that does not answer forks no more workers
		return nil, fmt.Errorf("ruvoy: the template did not fork worker %d: %w", slot, err)
	}
	if pid == 0 {
		return nil, fmt.Errorf("ruvoy: the template did not fork worker %d: %s", slot, text)
	}
	started(int(pid))
	return os.FindProcess(int(pid))
}

// gone says whether the template has exited.
func (t *template) gone() bool {
	select {
	case <-t.waited:
		return true
	default:
		return false
	}
}

// kill ends a template that failed.
func (t *template) kill() {
	t.cmd.Process.Kill()
}

// stop closes the template's socket, which stops it, and waits for it
// (stopWait at most: then it is killed).
func (t *template) stop() {
	t.conn.Close()
	select {
	case <-t.waited:
	case <-time.After(stopWait):
		t.kill()
		<-t.waited
	}
}

// forkWorker has the pool's template fork the worker of slot, first
// booting a new template if the last one exited.
func (p *Pool) forkWorker(slot int, sock, urgent *os.File) (*os.Process, error) {
	p.tmplMu.Lock()
	defer p.tmplMu.Unlock()
	if p.tmpl.gone() {
		p.log().Error("ruvoy: the template process exited: booting the app in a new one", zap.String("status", fmt.Sprint(p.tmpl.cmd.ProcessState)))
		t, err := p.startTemplate()
		if err != nil {
			return nil, err
		}
		p.tmpl = t
	}
	return p.tmpl.fork(slot, sock, urgent)
}

func (p *Pool) startTemplate() (*template, error) {
	return startTemplate(p.cfg.Template, bootTimeouts*p.cfg.Timeout, p.cfg.Timeout)
}

// renewTemplate boots a template with the app's code as it is now (a
// rolling restart) and has it fork the workers from then on.
func (p *Pool) renewTemplate() error {
	t, err := p.startTemplate()
	if err != nil {
		return err
	}
	p.tmplMu.Lock()
	p.mu.Lock()
	closing := p.closing // Stop sets it before it stops the template
	p.mu.Unlock()
	old := p.tmpl
	if !closing {
		p.tmpl = t
	}
	p.tmplMu.Unlock()
	if closing {
		t.stop()
		return errors.New("ruvoy: the workers are stopping")
	}
	go old.stop() // its workers are the front end's children, not its own
	return nil
}
