package ruvoycaddy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func init() {
	caddy.RegisterModule(StaticFS{})
}

// StaticFS is the file system caddy.fs.ruvoy_static: the files under Root,
// opened through an os.Root, so that no symlink leads out of Root whatever
// it points to or when it was swapped in. `ruvoy --static DIR` serves DIR
// through it. Caddy's file server and file matcher name files by absolute
// paths (the site root joined with the request path); names outside Root do
// not exist here.
type StaticFS struct {
	Root string `json:"root,omitempty"`
	root *os.Root
}

// UnmarshalCaddyfile reads, as a global option:
//
//	filesystem <name> ruvoy_static <root>
func (f *StaticFS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module's name
	if !d.NextArg() {
		return d.ArgErr()
	}
	f.Root = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// CaddyModule returns the Caddy module information.
func (StaticFS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.fs.ruvoy_static",
		New: func() caddy.Module { return new(StaticFS) },
	}
}

// Provision opens the root directory.
func (f *StaticFS) Provision(caddy.Context) error {
	abs, err := filepath.Abs(f.Root)
	if err != nil {
		return err
	}
	f.Root = abs
	f.root, err = os.OpenRoot(abs)
	return err
}

// Cleanup closes the root directory.
func (f *StaticFS) Cleanup() error {
	if f.root != nil {
		return f.root.Close()
	}
	return nil
}

// rel turns a name as Caddy gives it into one under the root.
func (f *StaticFS) rel(name string) (string, error) {
	if filepath.IsAbs(name) {
		rel, err := filepath.Rel(f.Root, filepath.Clean(name))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fs.ErrNotExist
		}
		name = rel
	}
	return name, nil
}

// Open opens a file under the root.
func (f *StaticFS) Open(name string) (fs.File, error) {
	rel, err := f.rel(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.root.Open(rel)
}

// Stat describes a file under the root.
func (f *StaticFS) Stat(name string) (fs.FileInfo, error) {
	rel, err := f.rel(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return f.root.Stat(rel)
}

// Glob expands nothing: a pattern names the one file it spells, if that
// exists (a request path with *, ? or [ in it matches no file).
func (f *StaticFS) Glob(pattern string) ([]string, error) {
	if strings.ContainsAny(pattern, `*?[\`) {
		return nil, nil
	}
	if _, err := f.Stat(pattern); err != nil {
		return nil, nil
	}
	return []string{pattern}, nil
}

// ReadDir lists a directory under the root.
func (f *StaticFS) ReadDir(name string) ([]fs.DirEntry, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	dir, ok := file.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return dir.ReadDir(-1)
}

var (
	_ fs.StatFS             = (*StaticFS)(nil)
	_ fs.GlobFS             = (*StaticFS)(nil)
	_ fs.ReadDirFS          = (*StaticFS)(nil)
	_ caddy.Provisioner     = (*StaticFS)(nil)
	_ caddy.CleanerUpper    = (*StaticFS)(nil)
	_ caddyfile.Unmarshaler = (*StaticFS)(nil)
)
