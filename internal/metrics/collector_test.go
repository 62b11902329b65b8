package metrics

import (
	"strings"
	"testing"

	"github.com/ruvoy/ruvoy/internal/serve"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric the collector describes is collected, once, with the
// refusals by each of their four reasons; a process with no worker pool
// reports no worker series.
func TestCollectorReportsWhatItDescribes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(Collector(serve.Start(serve.Options{}))); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
	}
	if n := got["ruvoy_requests_rejected_total"]; n != 4 {
		t.Errorf("ruvoy_requests_rejected_total: %d series, want one per reason (4)", n)
	}
	for _, m := range metrics {
		name := m.desc.String()
		found := false
		for f := range got {
			if strings.Contains(name, `"`+f+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("described, never collected: %s", name)
		}
	}
	if got["ruvoy_workers"] != 0 {
		t.Error("worker series without workers")
	}
}
