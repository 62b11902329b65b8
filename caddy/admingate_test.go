package ruvoycaddy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// Through the gate: the monitor's endpoints to anyone, the rest of the
// admin API with the token only, and nothing to a request addressed to
// another host than the loopback (DNS rebinding).
func TestAdminGate(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "admin.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var reached []string
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.RequestURI())
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the token reached the admin API")
		}
		io.WriteString(w, "admin "+r.URL.Path)
	})}
	go backend.Serve(l)
	defer backend.Close()
	gate := NewAdminGate("s3cret", socket)
	for _, tc := range []struct {
		method, target, host, auth string
		want                       int
	}{
		{"GET", "/metrics", "127.0.0.1:2019", "", 200},
		{"HEAD", "/ruvoy/ready", "localhost:2019", "", 200},
		{"GET", "/ruvoy/health", "[::1]:2019", "", 200},
		{"GET", "/config/", "127.0.0.1:2019", "", 401},
		{"POST", "/load", "127.0.0.1:2019", "", 401},
		{"POST", "/stop", "127.0.0.1:2019", "Bearer nope", 401},
		{"GET", "/debug/pprof/cmdline", "127.0.0.1:2019", "Basic s3cret", 401},
		{"POST", "/metrics", "127.0.0.1:2019", "", 401},
		{"GET", "/metrics/../config/", "127.0.0.1:2019", "", 401},
		{"GET", "/%6detrics", "127.0.0.1:2019", "", 401},
		{"GET", "/config/", "127.0.0.1:2019", "Bearer s3cret", 200},
		{"POST", "/load", "127.0.0.1:2019", "Bearer s3cret", 200},
		{"GET", "/metrics", "evil.example:2019", "", 403},
		{"GET", "/config/", "evil.example:2019", "Bearer s3cret", 403},
	} {
		r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.target, nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		gate.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s (Host %s, %q): %d, want %d", tc.method, tc.target, tc.host, tc.auth, w.Code, tc.want)
		}
		if tc.want == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: a 401 without WWW-Authenticate", tc.method, tc.target)
		}
	}
	want := []string{"GET /metrics", "HEAD /ruvoy/ready", "GET /ruvoy/health", "GET /config/", "POST /load"}
	if len(reached) != len(want) {
		t.Fatalf("the admin API got %q, want %q", reached, want)
	}
	for i := range want {
		if reached[i] != want[i] {
			t.Fatalf("the admin API got %q, want %q", reached, want)
		}
	}
	// No token configured: nothing but the monitor's endpoints.
	none := NewAdminGate("", socket)
	r := httptest.NewRequest("GET", "http://127.0.0.1/config/", nil)
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	none.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatalf("an empty token let %d through", w.Code)
	}
}
