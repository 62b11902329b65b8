package main

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// sweepPoints are the no-op scenarios that make the connection sweep, by
// connections: noop-cN, and noop at 100.
func sweepPoints(scens []scenario) map[int]string {
	points := map[int]string{}
	for _, sc := range scens {
		switch {
		case sc.name == "noop":
			points[100] = sc.name
		case strings.HasPrefix(sc.name, "noop-c"):
			if n, err := strconv.Atoi(strings.TrimPrefix(sc.name, "noop-c")); err == nil {
				points[n] = sc.name
			}
		}
	}
	return points
}

// sweepChart draws req/s against connections (a log scale), a line per
// server, when the run has at least three points of the sweep; "" if not.
func (r *runner) sweepChart(servers []server, scens []scenario) string {
	points := sweepPoints(scens)
	if len(points) < 3 {
		return ""
	}
	var conns []int
	for n := range points {
		conns = append(conns, n)
	}
	sort.Ints(conns)
	const width, height, left, top, plotW, plotH = 860, 420, 70, 20, 520, 340
	best := 0.0
	for _, srv := range servers {
		for _, n := range conns {
			if c, ok := r.cell(srv.name, points[n]); ok && c.good > 0 {
				best = math.Max(best, c.value)
			}
		}
	}
	if best == 0 {
		return ""
	}
	lo, hi := math.Log(float64(conns[0])), math.Log(float64(conns[len(conns)-1]))
	x := func(n int) float64 { return left + (math.Log(float64(n))-lo)/(hi-lo)*plotW }
	y := func(v float64) float64 { return top + plotH - v/best*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, top+plotH)
	for _, n := range conns {
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), top+plotH+16, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">connections (wrk -t1), no-op app</text>`+"\n", left+plotW/2, top+plotH+34)
	for i := 0; i <= 4; i++ {
		v := best * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%.0fk</text>`+"\n", left-6, y(v)+4, v/1000)
	}
	palette := []string{"#2c7fb8", "#41ab5d", "#fe9929", "#756bb1", "#969696", "#e7298a", "#66a61e", "#a6761d"}
	legend := 0
	for i, srv := range servers {
		var path []string
		for _, n := range conns {
			if c, ok := r.cell(srv.name, points[n]); ok && c.good > 0 {
				path = append(path, fmt.Sprintf("%.1f,%.1f", x(n), y(c.value)))
			}
		}
		if len(path) < 2 {
			continue
		}
		color, w := palette[i%len(palette)], 1.5
		if srv.name == "ruvoy" {
			color, w = "#c0392b", 3
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", color, w, strings.Join(path, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+plotW+16, top+legend*18+6, color, left+plotW+36, top+legend*18+12, html.EscapeString(srv.label))
		legend++
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
%s</svg>
`, width, height, b.String())
}
