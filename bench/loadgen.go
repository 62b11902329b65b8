package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// loadCommand runs a load generator, on CPU 0 when the scenario is pinned.
func loadCommand(pinned bool, name string, args ...string) *exec.Cmd {
	if pinned {
		return exec.Command("taskset", append([]string{"-c", "0", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// ---- wrk: HTTP/1.1, cleartext or TLS ----

func wrk(t target, path string, conns int, script string) sample {
	out := wrkRun(t.pinned, t.url+path, conns, *duration, script)
	os.WriteFile(t.raw, []byte(out), 0o644)
	return parseWrk(out, t.closes)
}

func wrkRun(pinned bool, url string, conns int, d time.Duration, script string) string {
	args := []string{"-t1", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency", "--timeout", "10s"}
	if script != "" {
		args = append(args, "-s", script)
	}
	out, _ := loadCommand(pinned, "wrk", append(args, url)...).CombinedOutput()
	return string(out)
}

var (
	rpsRe      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	requestsRe = regexp.MustCompile(`(\d+) requests in`)
	p50Re      = regexp.MustCompile(`\s50%\s+([\d.]+)(us|ms|s)`)
	p99Re      = regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`)
	errorsRe   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	non2xxRe   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk reads wrk's report. When the server closes every connection,
// read errors up to one per request are those closes, not failures.
func parseWrk(out string, closes bool) sample {
	var s sample
	if m := rpsRe.FindStringSubmatch(out); m != nil {
		s.value, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := requestsRe.FindStringSubmatch(out); m != nil {
		s.requests, _ = strconv.ParseFloat(m[1], 64)
	}
	s.p50ms, s.p99ms = wrkMs(p50Re, out), wrkMs(p99Re, out)
	s.ok = s.value > 0
	if m := errorsRe.FindStringSubmatch(out); m != nil && !(closes && closesOnly(m, s.requests)) {
		s.ok = false
		s.note = "socket errors (connect/read/write/timeout): " + strings.Join(m[1:], "/")
	}
	if m := non2xxRe.FindStringSubmatch(out); m != nil {
		s.ok = false
		s.note += " non-2xx: " + m[1]
	}
	if !s.ok && s.note == "" {
		s.note = "no result"
	}
	return s
}

// ---- h2load: HTTP/2 over TLS ----

var (
	h2rpsRe  = regexp.MustCompile(`finished in [\d.]+\w*, ([\d.]+) req/s`)
	h2reqsRe = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2codeRe = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

// h2load runs 100 connections of one stream each for the duration; p50
// and p99 come from its per-request log.
func h2load(t target) sample {
	logFile := t.raw + ".requests.tsv"
	args := []string{"-c", "100", "-m", "1", "-t", "1", "-D", strconv.Itoa(int(duration.Seconds())),
		"--warm-up-time", "1", "--log-file", logFile, t.url + "/"}
	out, _ := loadCommand(t.pinned, "h2load", args...).CombinedOutput()
	os.WriteFile(t.raw, out, 0o644)
	var s sample
	if m := h2rpsRe.FindSubmatch(out); m != nil {
		s.value, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	m := h2reqsRe.FindSubmatch(out)
	c := h2codeRe.FindSubmatch(out)
	if m == nil || c == nil || s.value == 0 {
		return sample{note: "no result"}
	}
	s.requests, _ = strconv.ParseFloat(string(m[4]), 64)
	if string(m[5]) != "0" || string(m[6]) != "0" || string(m[7]) != "0" {
		return sample{note: fmt.Sprintf("failed %s errored %s timeout %s", m[5], m[6], m[7])}
	}
	if string(c[2]) != "0" || string(c[3]) != "0" || string(c[4]) != "0" {
		return sample{note: fmt.Sprintf("non-2xx: %s 3xx %s 4xx %s 5xx", c[2], c[3], c[4])}
	}
	s.p50ms, s.p99ms = logPercentiles(logFile)
	s.ok = s.p99ms > 0
	os.Remove(logFile)
	return s
}

// logPercentiles reads h2load's log (start time, status, duration in µs)
// and returns the median and the p99, in ms.
func logPercentiles(file string) (p50, p99 float64) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	var d []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 {
			v, _ := strconv.ParseFloat(fields[2], 64)
			d = append(d, v/1000)
		}
	}
	if len(d) == 0 {
		return 0, 0
	}
	sort.Float64s(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// wrkMs is the latency percentile re finds in wrk's report, in ms (0: none).
func wrkMs(re *regexp.Regexp, out string) float64 {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	switch m[2] {
	case "us":
		v /= 1000
	case "s":
		v *= 1000
	}
	return v
}

// closesOnly: the only socket errors are read errors, at most one per
// request.
func closesOnly(m []string, requests float64) bool {
	reads, _ := strconv.ParseFloat(m[2], 64)
	return m[1] == "0" && m[3] == "0" && m[4] == "0" && reads <= requests
}
