package serve

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ruvoy/ruvoy/internal/conn"

	"go.uber.org/zap"
)

// sendfileHeaders are the response headers by which an app (Rack::Sendfile,
// Rails' x_sendfile_header) asks the server to send a file in its place.
var sendfileHeaders = []string{"X-Sendfile", "X-Accel-Redirect"}

// sendfile serves the file an X-Sendfile or X-Accel-Redirect header names,
// if it lies in one of the allowed directories; the app's own body (empty,
// by Rack::Sendfile) is then ignored. It reports whether it took over.
func (rs *responder) sendfile() (bool, error) {
	if len(rs.app.sendfileDirs) == 0 {
		rs.unsentFile()
		return false, nil
	}
	h := rs.w.Header()
	var target string
	for _, name := range sendfileHeaders {
		if v := h.Get(name); v != "" && target == "" {
			target = v
		}
		delete(h, name)
	}
	if target == "" {
		return false, nil
	}
	// The app's answer cannot be sent: 500 in its place, and why in the log.
	refuse := func(msg string, err error) (bool, error) {
		rs.app.logPath(msg, target, err)
		rs.pending = false
		rs.answer(http.StatusInternalServerError, false)
		return true, nil
	}
	f, size, err := openAllowed(target, rs.app.sendfileDirs)
	if err != nil {
		return refuse("ruvoy: the app asked to send a file the server may not send (X-Sendfile)", err)
	}
	defer f.Close()
	// A partial answer (206, an app's own range) sends the range its
	// Content-Range names, not the whole file under that header.
	first, length := int64(0), size
	if cr := h.Get("Content-Range"); cr != "" || rs.status == http.StatusPartialContent {
		var ok bool
		if first, length, ok = sendfileRange(cr, size); !ok {
			return refuse("ruvoy: the app sent a file (X-Sendfile) with a Content-Range it does not match: answered 500",
				fmt.Errorf("status %d, Content-Range %q, the file has %d bytes", rs.status, cr, size))
		}
	}
	if first > 0 {
		if _, err := f.Seek(first, io.SeekStart); err != nil {
			return refuse("ruvoy: seeking in a file to send (X-Sendfile) failed", err)
		}
	}
	h["Content-Length"] = []string{strconv.FormatInt(length, 10)}
	rs.commit()
	if rs.ignoreBody {
		return true, nil // the request was refused in the app's place
	}
	rs.ignoreBody = true
	if _, err := conn.CopyFile(rs.w, f, length, rs.app.opts.WriteChunk); err != nil {
		return true, errClientGone
	}
	return true, nil
}

// unsentFile warns, once for the app, that it asked for a file to be sent
// (Rails' config.action_dispatch.x_sendfile_header, Rack::Sendfile) that
// no directory allows: the header goes on as it is, to the client or a
// proxy in front. A request that says a proxy will send it
// (X-Sendfile-Type, X-Accel-Mapping: what nginx sets for Rack::Sendfile)
// is left alone.
func (rs *responder) unsentFile() {
	if rs.app.sendfileTold.Load() {
		return
	}
	h := rs.w.Header()
	for _, name := range sendfileHeaders {
		v := h.Get(name)
		if v == "" || rs.r.Header.Get("X-Sendfile-Type") != "" || rs.r.Header.Get("X-Accel-Mapping") != "" {
			continue
		}
		if rs.app.sendfileTold.CompareAndSwap(false, true) {
			rs.app.rt.log().Warn("ruvoy: the app set "+name+" to have the server send a file, but no --sendfile-dir (Caddyfile: sendfile_dirs) "+
				"allows one: the header goes on as it is, and the client gets the app's body (empty under Rack::Sendfile) "+
				"unless a proxy in front sends the file; said once",
				zap.String("header", name), zap.String("file", v), zap.String("method", rs.r.Method), zap.String("path", rs.r.URL.Path))
		}
		return
	}
}

// sendfileRange reads a 206's Content-Range, "bytes FIRST-LAST/SIZE" (SIZE
// may be "*"), against the file's size: the first byte and the length to
// send, and whether it names a range the file has.
func sendfileRange(cr string, size int64) (int64, int64, bool) {
	spec, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, complete, ok := strings.Cut(spec, "/")
	if !ok || (complete != "*" && complete != strconv.FormatInt(size, 10)) {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first || last >= size {
		return 0, 0, false
	}
	return first, last - first + 1, true
}

// sendfileDir is a directory X-Sendfile may name files in: the os.Root
// that opens them, and the directory's path as given and with its symlinks
// resolved (an app may name its files either way).
type sendfileDir struct {
	root  *os.Root
	names []string
}

func openSendfileDirs(dirs []string) ([]sendfileDir, error) {
	var out []sendfileDir
	for _, dir := range dirs {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		d := sendfileDir{root: root, names: []string{filepath.Clean(dir)}}
		if resolved, err := filepath.EvalSymlinks(dir); err == nil && resolved != d.names[0] {
			d.names = append(d.names, resolved)
		}
		out = append(out, d)
	}
	return out, nil
}

func closeSendfileDirs(dirs []sendfileDir) {
	for _, d := range dirs {
		d.root.Close()
	}
}

var errNotAllowed = errors.New("the path is not under a --sendfile-dir")

// openAllowed opens target (an absolute path) under the allowed directory
// that holds it, through that directory's os.Root: one open that follows no
// symlink out of the directory, so a link swapped in after a check cannot
// lead elsewhere. It must be a regular file; O_NONBLOCK keeps the open of a
// FIFO or device from waiting for a writer.
func openAllowed(target string, dirs []sendfileDir) (*os.File, int64, error) {
	if !filepath.IsAbs(target) {
		return nil, 0, errors.New("the path is not absolute")
	}
	clean := filepath.Clean(target)
	for _, d := range dirs {
		for _, name := range d.names {
			rel, err := filepath.Rel(name, clean)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return nil, 0, err
			}
			info, err := f.Stat()
			if err != nil || !info.Mode().IsRegular() {
				f.Close()
				return nil, 0, errors.New("not a regular file")
			}
			return f, info.Size(), nil
		}
	}
	return nil, 0, errNotAllowed
}
