package test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fleet tests' network, on this one machine: a bridge in the root
// namespace (the balancer's side, .1) and a network namespace per host
// (.11, .12, .13) and one for a client (.50), each joined to the bridge by
// a veth pair, in a range RFC 5737 keeps for documentation: TEST-NET-1,
// unless this machine already uses it (some sandboxes give eth0
// 192.0.2.2/24 with 192.0.2.1 as the default gateway: taking .1 for the
// bridge would cut the machine off), then TEST-NET-2.
var fleetSubnets = []string{"192.0.2.0/24", "198.51.100.0/24"}

const (
	fleetBridge   = "rvfleet0"
	fleetClientNS = "rvf-c"
	fleetHostPort = "8080" // each host has its own namespace, so one port for all
)

// fleetNet is the network a fleet test made.
type fleetNet struct {
	subnet  netip.Prefix
	gateway string // the bridge's address: the balancer's, the hosts' trusted proxy
	client  string // the client namespace's address
	hosts   []fleetHost
}

// fleetHost is a host of the fleet: its namespace and address.
type fleetHost struct {
	name string // h1, h2, h3: what the app answers as host=
	ns   string
	ip   string
}

func (h fleetHost) addr() string { return h.ip + ":" + fleetHostPort }

// fleetNamespaceNames is every namespace the tests make.
var fleetNamespaceNames = []string{"rvf-h1", "rvf-h2", "rvf-h3", fleetClientNS}

// ipRun runs the ip command (iproute2) and fails the test if it fails.
func ipRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fleetSubnetInUse is the first of this machine's IPv4 addresses and routes
// that falls in subnet, "" if none does.
func fleetSubnetInUse(t testing.TB, subnet netip.Prefix) string {
	t.Helper()
	var lines []string
	for _, args := range [][]string{{"-4", "-o", "addr", "show"}, {"-4", "route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
		}
		lines = append(lines, strings.Split(string(out), "\n")...)
	}
	for _, line := range lines {
		for _, f := range strings.Fields(line) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				a, err := netip.ParseAddr(f)
				if err != nil {
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if p.Overlaps(subnet) {
				return strings.TrimSpace(line)
			}
		}
	}
	return ""
}

// setupFleetNet makes the bridge and the namespaces, and removes them when
// the test ends. Namespaces need root.
func setupFleetNet(t *testing.T) *fleetNet {
	t.Helper()
	needRoot(t, "the fleet tests make network namespaces and a bridge")
	lockFleet(t)
	// What an earlier run that crashed may have left.
	removeFleetNet()
	t.Cleanup(func() {
		removeFleetNet()
		if left := fleetLeftovers(); left != "" {
			t.Errorf("the fleet's network is still there after the cleanup: %s", left)
		}
	})
	var subnet netip.Prefix
	var used []string
	for _, s := range fleetSubnets {
		p := netip.MustParsePrefix(s)
		if line := fleetSubnetInUse(t, p); line != "" {
			used = append(used, s+" ("+line+")")
			continue
		}
		subnet = p
		break
	}
	if !subnet.IsValid() {
		t.Fatalf("every range the fleet may use is in use on this machine: %s", strings.Join(used, "; "))
	}
	if len(used) > 0 {
		t.Logf("this machine uses %s: the fleet takes %s", strings.Join(used, "; "), subnet)
	}
	ip := func(n byte) string {
		a := subnet.Addr().As4()
		a[3] = n
		return netip.AddrFrom4(a).String()
	}
	n := &fleetNet{subnet: subnet, gateway: ip(1), client: ip(50)}
	for i := range 3 {
		n.hosts = append(n.hosts, fleetHost{fmt.Sprintf("h%d", i+1), fleetNamespaceNames[i], ip(byte(11 + i))})
	}
	bits := fmt.Sprintf("/%d", subnet.Bits())

	ipRun(t, "link", "add", fleetBridge, "type", "bridge")
	ipRun(t, "addr", "add", n.gateway+bits, "dev", fleetBridge)
	ipRun(t, "link", "set", fleetBridge, "up")
	addrs := map[string]string{fleetClientNS: n.client}
	for _, h := range n.hosts {
		addrs[h.ns] = h.ip
	}
	for _, ns := range fleetNamespaceNames {
		outer, inner := ns+"-br", ns+"-in" // at most 15 bytes: the kernel's limit
		ipRun(t, "netns", "add", ns)
		ipRun(t, "link", "add", outer, "type", "veth", "peer", "name", inner)
		ipRun(t, "link", "set", outer, "master", fleetBridge)
		ipRun(t, "link", "set", outer, "up")
		ipRun(t, "link", "set", inner, "netns", ns)
		ipRun(t, "-n", ns, "addr", "add", addrs[ns]+bits, "dev", inner)
		ipRun(t, "-n", ns, "link", "set", inner, "up")
		ipRun(t, "-n", ns, "link", "set", "lo", "up")
	}
	return n
}

// fleetLock is held by the process whose test uses the fleet's names: two
// runs at once on one machine (two worktrees' make e2e) would remove each
// other's namespaces.
const fleetLock = "/run/lock/ruvoy-fleet.lock"

// lockFleet waits (5 minutes at most) for fleetLock and holds it until
// the test ends. A crashed holder's lock goes with its process.
func lockFleet(t *testing.T) {
	t.Helper()
	os.MkdirAll(filepath.Dir(fleetLock), 0o755)
	deadline, said := time.Now().Add(5*time.Minute), false
	for {
		f, err := os.OpenFile(fleetLock, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if time.Now().After(deadline) {
				t.Fatalf("another process has held %s for 5 minutes (a fleet test elsewhere?)", fleetLock)
			}
			if !said {
				t.Logf("waiting for %s: another process runs a fleet test", fleetLock)
				said = true
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		// The holder before removes the file as it lets go: a lock taken on
		// a file no longer at the path is no lock.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(fleetLock, &now) == nil &&
			held.Dev == now.Dev && held.Ino == now.Ino {
			t.Cleanup(func() {
				os.Remove(fleetLock)
				f.Close()
			})
			return
		}
		f.Close()
	}
}

// removeFleetNet kills what runs in the fleet's namespaces and removes
// them, their links and the bridge; what is not there is skipped.
func removeFleetNet() {
	for _, ns := range fleetNamespaceNames {
		killNamespace(ns)
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", ns+"-br").Run() // takes its peer along
	}
	exec.Command("ip", "link", "del", fleetBridge).Run()
}

// killNamespace kills, by process id, what still runs in namespace ns:
// only processes the fleet tests started live there.
func killNamespace(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// fleetLeftovers says which of the fleet's namespaces and links exist.
func fleetLeftovers() string {
	var left []string
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range fleetNamespaceNames {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == ns {
				left = append(left, "namespace "+ns)
			}
		}
	}
	for _, link := range append([]string{fleetBridge}, fleetNamespaceNames...) {
		if link != fleetBridge {
			link += "-br"
		}
		if exec.Command("ip", "link", "show", link).Run() == nil {
			left = append(left, "link "+link)
		}
	}
	return strings.Join(left, ", ")
}

// launchNS starts the binary with args in namespace ns ("": this one;
// `ip netns exec` execs it: the process is ruvoy itself), in directory dir
// with env added, and stops it (SIGTERM) when the test ends; addr is where
// it will listen. It does not wait: see waitReady. Should the test process
// die first, the kernel kills it (a test timeout would leave it serving).
func launchNS(t testing.TB, ns, dir string, env []string, addr string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, binary(t)}, args...)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return launchCmd(t, cmd, dir, env, addr)
}

// inNS runs a command in namespace ns and returns its standard output.
func inNS(t testing.TB, ns string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("in %s, %s: %v\n%s", ns, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
