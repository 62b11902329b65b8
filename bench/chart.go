package main

import (
	"fmt"
	"html"
	"strings"
)

// chart draws one panel per scenario: a bar per server scaled to the best
// in that panel, labelled with its median and p99.
func (r *runner) chart(servers []server, scens []scenario) string {
	const width, labelW, barW, rowH = 980, 210, 480, 20
	var body strings.Builder
	y := 10
	for _, sc := range scens {
		type bar struct {
			label string
			c     cell
		}
		var bars []bar
		best := 0.0
		for _, srv := range servers {
			if c, _ := r.cell(srv.name, sc.name); srv.runs(sc) && c.good > 0 {
				bars = append(bars, bar{srv.label, c})
				if c.value > best {
					best = c.value
				}
			}
		}
		if len(bars) == 0 {
			continue
		}
		fmt.Fprintf(&body, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+14, html.EscapeString(sc.label))
		y += 22
		for _, b := range bars {
			w := int(b.c.value / best * barW)
			color := "#9aa5b1"
			if b.label == "ruvoy" {
				color = "#c0392b"
			}
			unit := "req/s"
			if sc.name == "ttfb" {
				unit = "ms"
			}
			fmt.Fprintf(&body, `<text x="10" y="%d">%s</text><rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+
				`<text x="%d" y="%d">%.0f %s · p99 %.1f ms</text>`+"\n",
				y+14, html.EscapeString(b.label), labelW, y+2, max(w, 1), rowH-6, color,
				labelW+max(w, 1)+6, y+14, b.c.value, unit, b.c.p99)
			y += rowH
		}
		y += 12
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
%s</svg>
`, width, y+10, body.String())
}
