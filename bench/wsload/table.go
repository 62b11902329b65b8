package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The summary: per metric and server, the median over the rounds with
// data, their relative standard deviation and the ratio to ruvoy.

func printTable(list []server, results map[string][][]float64, skipped map[string]string) {
	var b strings.Builder
	b.WriteString("| median (rsd), ratio to ruvoy |")
	for _, s := range list {
		b.WriteString(" " + s.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(list)) + "\n")
	for m, met := range metrics {
		ref := math.NaN()
		if r := results["ruvoy"]; r != nil {
			ref = medianOK(r[m])
		}
		b.WriteString("| " + met.name + " |")
		for _, s := range list {
			switch {
			case skipped[s.name] != "":
				b.WriteString(" skipped |")
				continue
			case results[s.name] == nil || countOK(results[s.name][m]) == 0:
				b.WriteString(" no data |")
				continue
			}
			v := results[s.name][m]
			med := medianOK(v)
			cell := fmt.Sprintf(" %s (%.0f%%)", format(med), 100*rsdOK(v))
			if n := countOK(v); n < len(v) {
				cell += fmt.Sprintf(" [%d of %d rounds]", n, len(v))
			}
			if s.name != "ruvoy" && !math.IsNaN(ref) && ref != 0 {
				cell += fmt.Sprintf(", %.2fx", med/ref)
			}
			b.WriteString(cell + " |")
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
	fmt.Println("\nRatios are the server's median over ruvoy's: above 1 is more round trips for the rates, more memory or time for the rest.")
	for _, s := range list {
		if why := skipped[s.name]; why != "" {
			fmt.Printf("%s: %s\n", s.name, why)
		}
	}
}

func format(v float64) string {
	switch {
	case v >= 1000:
		s := fmt.Sprintf("%.0f", v)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func okValues(v []float64) []float64 {
	var out []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

func countOK(v []float64) int { return len(okValues(v)) }

func medianOK(v []float64) float64 {
	v = okValues(v)
	if len(v) == 0 {
		return math.NaN()
	}
	return median(v)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rsdOK is the relative standard deviation of the rounds with data.
func rsdOK(v []float64) float64 {
	v = okValues(v)
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq/float64(len(v))) / math.Abs(mean)
}
