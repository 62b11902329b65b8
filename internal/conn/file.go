package conn

import (
	"errors"
	"io"
	"net/http"
	"os"
	"syscall"
)

// CopyFile sends length bytes of f, from its current offset, as the
// response body, with sendfile(2) where Go can (cleartext HTTP/1). piece
// is the size of the pieces the server's writer cuts a copy into, or 0.
//
// Go's net package sends a file with sendfile when the reader it is given
// is a file (a syscall.Conn), or an *io.LimitedReader of one. Caddy's write
// idle timeout (its IdleTimeoutWriter, on by default) cuts a copy into
// pieces of max_write_chunk bytes, each an io.LimitedReader of our reader:
// io.CopyN's own LimitedReader would make that two levels deep, and Go
// would copy through a buffer instead. So under that writer the body is a
// fileBody, which offers the file to sendfile only while at least a piece
// remains: no piece can go past length, even if the file grows meanwhile.
func CopyFile(w http.ResponseWriter, f *os.File, length, piece int64) (int64, error) {
	if piece == 0 {
		return io.CopyN(w, f, length) // one LimitedReader: sendfile sees through it
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return io.CopyN(w, f, length)
	}
	n, err := io.Copy(w, &fileBody{f: f, end: off + length, piece: piece})
	if err == nil && n < length {
		err = io.ErrUnexpectedEOF // the file shrank
	}
	return n, err
}

// fileBody reads a file up to end. sendfile moves the file's offset
// without a Read, so where it stands is asked of the file each time.
type fileBody struct {
	f     *os.File
	end   int64
	piece int64
}

var errPieceLeft = errors.New("less than a piece left: copy it")

func (b *fileBody) Read(p []byte) (int, error) {
	off, err := b.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	left := b.end - off
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	return b.f.Read(p)
}

// SyscallConn offers the file to sendfile while a whole piece is left;
// after that net copies the rest through Read.
func (b *fileBody) SyscallConn() (syscall.RawConn, error) {
	off, err := b.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if b.end-off < b.piece {
		return nil, errPieceLeft
	}
	return b.f.SyscallConn()
}

// SendfileWriter wraps w, whose copies the server cuts into pieces of
// piece bytes, so that a handler copying a file through it, as Caddy's
// file_server does (io.CopyN of an *os.File), keeps sendfile(2) under
// Caddy's write idle timeout; it returns w itself where there is nothing
// to keep (piece 0).
func SendfileWriter(w http.ResponseWriter, piece int64) http.ResponseWriter {
	if piece == 0 {
		return w
	}
	return &sendfileWriter{ResponseWriter: w, piece: piece}
}

type sendfileWriter struct {
	http.ResponseWriter
	piece int64
}

func (w *sendfileWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom turns io.CopyN's LimitedReader of a file into a fileBody.
func (w *sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if f, ok := lr.R.(*os.File); ok {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil {
				n, err := io.Copy(w.ResponseWriter, &fileBody{f: f, end: off + lr.N, piece: w.piece})
				lr.N -= n
				return n, err
			}
		}
	}
	return io.Copy(w.ResponseWriter, r)
}
