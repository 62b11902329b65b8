package ruvoycaddy

import "testing"

func TestQueryFilter(t *testing.T) {
	f := QueryFilter{Names: []string{"passw", "token", "_key"}}
	for in, want := range map[string]string{
		"/login":                           "/login",
		"/login?user=bob&password=hunter2": "/login?user=bob&password=[FILTERED]",
		"/x?user%5Bpassword%5D=a&q=1":      "/x?user%5Bpassword%5D=[FILTERED]&q=1",
		"/x?API_KEY=1&Token&keep=a%20b":    "/x?API_KEY=[FILTERED]&Token=[FILTERED]&keep=a%20b",
		"/x?a=1&&b=2#passwd=frag":          "/x?a=1&&b=2#passwd=frag",
		"/x?%zz=1&passwd=2":                "/x?%zz=1&passwd=[FILTERED]",
	} {
		if got := f.uri(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}
