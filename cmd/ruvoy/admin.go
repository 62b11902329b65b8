package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/sys/unix"

	ruvoycaddy "github.com/ruvoy/ruvoy/caddy"
)

// The admin API of `ruvoy config.ru`. Caddy's admin API takes no
// credential, so it never listens on a port here: it listens on a unix
// socket of mode 0600, the one --admin-socket names or one in a directory
// of the server's own; --admin-port serves a gate in front of it
// (ruvoycaddy.AdminGate), open to monitors for /metrics and the probes and
// to holders of the admin token for the rest.

// adminTokenEnv names the admin token when --admin-token-file does not.
const adminTokenEnv = "RUVOY_ADMIN_TOKEN"

// readAdminToken is the token --admin-token-file names: the file's first
// line.
func readAdminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %v", err)
	}
	token, _, _ := strings.Cut(string(b), "\n")
	if token = strings.TrimSpace(token); token == "" {
		return "", fmt.Errorf("--admin-token-file: %s has no token on its first line", path)
	}
	return token, nil
}

// adminSocketPath is where Caddy's admin API listens: --admin-socket, or
// under the directory prepareAdmin made.
func (o *options) adminSocketPath() string {
	if o.adminSocket != "" {
		return o.adminSocket
	}
	if o.adminDir != "" {
		return filepath.Join(o.adminDir, "admin.sock")
	}
	// --print-config: where it would be.
	return filepath.Join(os.TempDir(), "ruvoy-admin-XXXXXX", "admin.sock")
}

// adminListen is the admin API's address in Caddy's config, or "" for none.
func (o *options) adminListen() string {
	if o.adminPort == "" && o.adminSocket == "" {
		return ""
	}
	return "unix/" + o.adminSocketPath() + "|0600"
}

// prepareAdmin makes the directory, of the server's user alone, whose
// socket the admin port's gate reaches Caddy's admin API by (removed at
// exit), and the token when none was given. The token leaves the
// environment first: the app and its child processes have no use for it.
func prepareAdmin(o *options) error {
	os.Unsetenv(adminTokenEnv)
	if o.adminPort == "" {
		return nil
	}
	if o.adminSocket == "" {
		dir, err := os.MkdirTemp("", "ruvoy-admin-")
		if err != nil {
			return fmt.Errorf("--admin-port: a directory for the admin API's socket: %v", err)
		}
		o.adminDir = dir
		caddy.OnExit(func(context.Context) { os.RemoveAll(dir) })
	}
	if o.adminToken == "" {
		b := make([]byte, 24)
		rand.Read(b)
		o.adminToken, o.adminTokenMade = hex.EncodeToString(b), true
	}
	return nil
}

// serveAdminPort serves the gate on 127.0.0.1:--admin-port, once Caddy's
// admin API listens, and prints the token if it made it.
func serveAdminPort(o *options) error {
	if o.adminPort == "" {
		return nil
	}
	lc := net.ListenConfig{}
	if o.reusePort {
		// An overlapping restart: the old server holds the port meanwhile,
		// as Caddy's own listeners allow.
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
			return errors.Join(err, serr)
		}
	}
	addr := net.JoinHostPort("127.0.0.1", o.adminPort)
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return fmt.Errorf("--admin-port: %v", err)
	}
	srv := &http.Server{
		Handler:           ruvoycaddy.NewAdminGate(o.adminToken, o.adminSocketPath()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	go srv.Serve(l)
	if o.adminTokenMade {
		fmt.Printf("ruvoy: admin API on http://%s: /metrics, /ruvoy/ready and /ruvoy/health for anyone local; the rest with \"Authorization: Bearer %s\" (this token is printed once; --admin-token-file or %s chooses one)\n",
			addr, o.adminToken, adminTokenEnv)
	}
	return nil
}
