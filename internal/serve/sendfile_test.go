package serve

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// openAllowed opens only regular files under an allowed directory, through
// its os.Root: no symlink out of it, no FIFO (whose open would wait for a
// writer), nothing outside it.
func TestOpenAllowed(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "files")
	os.Mkdir(allowed, 0o755)
	os.Mkdir(filepath.Join(allowed, "sub"), 0o755)
	os.WriteFile(filepath.Join(allowed, "sub", "plain.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o644)
	os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(allowed, "out.txt"))
	os.Symlink("sub/plain.txt", filepath.Join(allowed, "in.txt"))
	if err := syscall.Mkfifo(filepath.Join(allowed, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The directory named through a symlink of its own, as apps may.
	os.Symlink(allowed, filepath.Join(dir, "alias"))
	dirs, err := openSendfileDirs([]string{filepath.Join(dir, "alias")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(allowed, "sub/plain.txt"), "inside"},
		{filepath.Join(dir, "alias/sub/plain.txt"), "inside"},
		{filepath.Join(allowed, "in.txt"), "inside"},
		{filepath.Join(allowed, "sub/../sub/plain.txt"), "inside"},
		{filepath.Join(allowed, "out.txt"), ""},
		{filepath.Join(allowed, "fifo"), ""},
		{filepath.Join(allowed, "sub"), ""},
		{filepath.Join(allowed, "../secret.txt"), ""},
		{filepath.Join(dir, "secret.txt"), ""},
		{"sub/plain.txt", ""},
	} {
		f, size, err := openAllowed(c.path, dirs)
		if c.want == "" {
			if err == nil {
				f.Close()
				t.Errorf("%s: opened, want refused", c.path)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != c.want || size != int64(len(c.want)) {
			t.Errorf("%s: got %q (%d bytes), want %q", c.path, b, size, c.want)
		}
	}
	if _, _, err := openAllowed(filepath.Join(dir, "secret.txt"), dirs); !errors.Is(err, errNotAllowed) {
		t.Errorf("outside: got %v, want errNotAllowed", err)
	}
}

// sendfileRange takes only a Content-Range of bytes the file has.
func TestSendfileRange(t *testing.T) {
	for _, c := range []struct {
		cr            string
		first, length int64
		ok            bool
	}{
		{"bytes 0-9/10", 0, 10, true},
		{"bytes 3-3/10", 3, 1, true},
		{"bytes 2-5/*", 2, 4, true},
		{"bytes 0-10/10", 0, 0, false}, // past the end
		{"bytes 0-9/11", 0, 0, false},  // another size
		{"bytes 5-4/10", 0, 0, false},
		{"bytes -5/10", 0, 0, false},
		{"bytes 0-9", 0, 0, false},
		{"items 0-9/10", 0, 0, false},
		{"", 0, 0, false},
	} {
		first, length, ok := sendfileRange(c.cr, 10)
		if first != c.first || length != c.length || ok != c.ok {
			t.Errorf("%q: %d, %d, %v; want %d, %d, %v", c.cr, first, length, ok, c.first, c.length, c.ok)
		}
	}
}
