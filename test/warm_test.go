package test

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Ruvoy.warm in a before_fork block serves the app requests in the
// --preload template before any worker is forked: each worker starts with
// what they made (here, the paths they served); it returns each path's
// statuses; and outside a template (as the app loads, in one process, in
// workers started anew) it does nothing.
func TestClusterPreloadWarm(t *testing.T) {
	type answer struct {
		Pid    int              `json:"pid"`
		Served []string         `json:"served"`
		Warmed map[string][]int `json:"warmed"`
		AtLoad map[string][]int `json:"at_load"`
	}
	ask := func(t *testing.T, s *server) answer {
		t.Helper()
		r := s.get(t, "/first")
		var a answer
		if r.status != 200 || json.Unmarshal([]byte(r.body), &a) != nil {
			t.Fatalf("GET /first: %d %q", r.status, r.body)
		}
		return a
	}
	warm := []string{"/", "/", "/", "/missing", "/missing", "/missing"}
	for _, c := range []struct {
		name   string
		args   []string
		served []string
		warmed map[string][]int
	}{
		{"-w 2 --preload", []string{"-w", "2", "--preload"}, append(warm, "/first"), map[string][]int{"/": {200}, "/missing": {404}}},
		{"-w 2", []string{"-w", "2"}, []string{"/first"}, map[string][]int{}},
		{"one process", nil, []string{"/first"}, map[string][]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, append(c.args, app("warm.ru"))...)
			a := ask(t, s)
			if !reflect.DeepEqual(a.Served, c.served) {
				t.Errorf("the worker's first request found %v served in it, want %v", a.Served, c.served)
			}
			if !reflect.DeepEqual(a.Warmed, c.warmed) {
				t.Errorf("Ruvoy.warm returned %v in the template, want %v", a.Warmed, c.warmed)
			}
			if len(a.AtLoad) != 0 {
				t.Errorf("Ruvoy.warm as the app loaded returned %v, want nothing done", a.AtLoad)
			}
		})
	}
}
