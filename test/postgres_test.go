package test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"testing"
)

// startPostgres runs a throwaway PostgreSQL cluster on loopback for one
// test and returns a URL for database name. As root it runs as the
// postgres user, which the server insists on.
func startPostgres(t *testing.T, name string) string {
	t.Helper()
	return startPostgresAt(t, name, "127.0.0.1", netip.Prefix{})
}

// startPostgresAt is startPostgres listening on listen, and letting in
// clients from allow too when it is valid (trust: a throwaway cluster on
// a private bridge): the fleet's hosts, in their own namespaces, reach it
// on the bridge's address (fleet_test.go).
func startPostgresAt(t *testing.T, name, listen string, allow netip.Prefix) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	need(t, len(bins) > 0, "PostgreSQL (make setup-test installs it)")
	sort.Strings(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "ruvoy-pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	as := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root, but there is no postgres user")
		}
		exec.Command("chown", pg.Uid+":"+pg.Gid, dir).Run()
		as = func(args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
	}
	port := freePort(t)
	data := filepath.Join(dir, "data")
	run := func(args ...string) {
		t.Helper()
		if out, err := as(args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	if allow.IsValid() {
		hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(hba, "host all all %s trust\n", allow)
		hba.Close()
	}
	run(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "start",
		"-o", fmt.Sprintf("-p %s -k %s -c listen_addresses=%s -c max_connections=200 -c fsync=off", port, dir, listen))
	t.Cleanup(func() { as(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run() })
	run(filepath.Join(bin, "psql"), "-h", listen, "-p", port, "-U", "postgres", "-c", "CREATE DATABASE "+name)
	return fmt.Sprintf("postgres://postgres@%s:%s/%s", listen, port, name)
}
