package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A port in use is held by some process: Linux says which in /proc, the
// listening socket's inode in /proc/net/tcp and tcp6, the descriptor that
// holds it in /proc/PID/fd (every process's to root, one's own otherwise).

// holder is a process listening on a port.
type holder struct {
	pid     int
	command string // its command line, or its name
	ruvoy   bool
}

// portHolder finds the process listening where addr (host:port) would
// bind, if /proc lets this process see it.
func portHolder(addr string) (holder, bool) {
	host, p, err := net.SplitHostPort(addr)
	port, err2 := strconv.ParseUint(p, 10, 16)
	if err != nil || err2 != nil {
		return holder{}, false
	}
	ip := net.ParseIP(host)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, inode := range listeningInodes(table, ip, uint16(port)) {
			inodes[inode] = true
		}
	}
	if len(inodes) == 0 {
		return holder{}, false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	pids := make([]int, 0, len(procs))
	for _, dir := range procs {
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids) // a server's first process before the workers that inherited its socket
	for _, pid := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			inode, ok := strings.CutPrefix(link, "socket:[")
			if err != nil || !ok || !inodes[strings.TrimSuffix(inode, "]")] {
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			name := strings.TrimSpace(string(comm))
			command := name
			if argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(argv) > 0 {
				command = strings.TrimSpace(strings.ReplaceAll(string(argv), "\x00", " "))
			}
			return holder{pid: pid, command: command, ruvoy: strings.HasPrefix(name, "ruvoy")}, true
		}
	}
	return holder{}, false
}

// listeningInodes reads a /proc/net/tcp table: the inodes of the sockets
// listening on port whose address overlaps ip (the same, or either one
// every address).
func listeningInodes(table string, ip net.IP, port uint16) []string {
	f, err := os.Open(table)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // TCP_LISTEN
			continue
		}
		hexIP, hexPort, ok := strings.Cut(fields[1], ":")
		n, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil || uint16(n) != port {
			continue
		}
		theirs := procIP(hexIP)
		if theirs == nil || theirs.IsUnspecified() || ip == nil || ip.IsUnspecified() || theirs.Equal(ip) {
			out = append(out, fields[9])
		}
	}
	return out
}

// procIP reads an address as /proc/net/tcp writes it: 32-bit words in the
// host's order (little-endian on the machines ruvoy runs on).
func procIP(s string) net.IP {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}

// portInUse words the refusal of an address in use, naming who holds it
// when that can be told.
func portInUse(addr string) error {
	h, ok := portHolder(addr)
	switch {
	case !ok:
		return fmt.Errorf("%s is already in use (address in use; which process holds it is not visible to this user); "+
			"if it is a ruvoy, --reuse-port shares it on purpose, for an overlapping restart", addr)
	case h.ruvoy:
		return fmt.Errorf("%s is already in use by another ruvoy (pid %d: %s); --reuse-port shares it on purpose, for an overlapping restart",
			addr, h.pid, h.command)
	}
	return fmt.Errorf("%s is already in use by pid %d (%s)", addr, h.pid, h.command)
}
