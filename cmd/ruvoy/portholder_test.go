package main

import (
	"net"
	"strings"
	"testing"
)

func TestProcIP(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F":                         "127.0.0.1",
		"00000000":                         "0.0.0.0",
		"00000000000000000000000001000000": "::1",
		"00000000000000000000000000000000": "::",
	} {
		if got := procIP(in); got.String() != want {
			t.Errorf("%s: %v, want %s", in, got, want)
		}
	}
}

// A port this process listens on is named as held by this process.
func TestPortInUseNamesTheHolder(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	inodes := listeningInodes("/proc/net/tcp", net.ParseIP("127.0.0.1"), uint16(l.Addr().(*net.TCPAddr).Port))
	if len(inodes) != 1 {
		t.Fatalf("inodes %v", inodes)
	}
	// portHolder leaves this process out (it is ruvoy's own check's), so
	// the holder is looked for as another process would.
	if _, ok := portHolder(addr); ok {
		t.Errorf("this process named as the holder of its own check")
	}
	msg := portInUse(addr).Error()
	if !strings.HasPrefix(msg, addr+" is already in use (address in use;") {
		t.Errorf("message %q", msg)
	}
}
