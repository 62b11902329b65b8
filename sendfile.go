package ruvoy

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sendfileHeaders are the response headers by which an app (Rack::Sendfile,
// Rails' x_sendfile_header) asks the server to send a file in its place.
var sendfileHeaders = []string{"X-Sendfile", "X-Accel-Redirect"}

// sendfile serves the file an X-Sendfile or X-Accel-Redirect header names,
// if it lies in one of the allowed directories; the app's own body (empty,
// by Rack::Sendfile) is then ignored. It reports whether it took over.
func (rs *responder) sendfile(status int) (bool, error) {
	if len(rs.sendfileDirs) == 0 {
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
	path, ok := allowedFile(target, rs.sendfileDirs)
	var f *os.File
	var info os.FileInfo
	var err error
	if ok {
		if f, err = os.Open(path); err == nil {
			info, err = f.Stat()
		}
	}
	if !ok || err != nil || !info.Mode().IsRegular() {
		if f != nil {
			f.Close()
		}
		rs.log("ruvoy: the app asked to send a file the server may not send (X-Sendfile)", target)
		delete(h, "Content-Length")
		http.Error(rs.w, "Internal Server Error", http.StatusInternalServerError)
		rs.wroteHead, rs.ignoreBody = true, true
		return true, nil
	}
	defer f.Close()
	h["Content-Length"] = []string{strconv.FormatInt(info.Size(), 10)}
	rs.w.WriteHeader(status)
	rs.wroteHead, rs.ignoreBody = true, true
	if _, err := io.CopyN(rs.w, f, info.Size()); err != nil {
		return true, errClientGone
	}
	return true, nil
}

// allowedFile resolves target (a file path) and checks that it lies in
// one of dirs, symlinks resolved.
func allowedFile(target string, dirs []string) (string, bool) {
	if !filepath.IsAbs(target) {
		return "", false
	}
	path, err := filepath.EvalSymlinks(filepath.Clean(target))
	if err != nil {
		return "", false
	}
	for _, dir := range dirs {
		root, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return path, true
		}
	}
	return "", false
}
