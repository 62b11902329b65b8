package serve

import "testing"

// A client is its address; an IPv6 one by its /64, a mapped IPv4 one as
// IPv4; a peer that is no address is none.
func TestClientOf(t *testing.T) {
	for _, tc := range []struct {
		remote, want string
		ok           bool
	}{
		{"192.0.2.1", "192.0.2.1", true},
		{"::ffff:192.0.2.1", "192.0.2.1", true},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::", true},
		{"2001:db8:1:2::9", "2001:db8:1:2::", true},
		{"fe80::1%eth0", "fe80::", true},
		{"@", "", false},
		{"", "", false},
	} {
		who, ok := clientOf(tc.remote)
		if ok != tc.ok || (ok && who.String() != tc.want) {
			t.Errorf("clientOf(%q) = %v, %v; want %s, %v", tc.remote, who, ok, tc.want, tc.ok)
		}
	}
}
