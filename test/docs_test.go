package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The docs cannot drift from the code: every `sh` block in README.md,
// docs/ and the examples' READMEs runs (in a copy of the checkout, with the
// built ruvoy on PATH), every complete JSON config and Caddyfile in them
// validates (HAProxy and nginx ones with haproxy -c and nginx -t), and
// the usage in README.md is `ruvoy --help`, word for word.

type block struct {
	file, lang, text string
	line             int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\\n")

func docBlocks(t *testing.T) []block {
	t.Helper()
	files, _ := filepath.Glob("../docs/*.md")
	examples, _ := filepath.Glob("../examples/*/README.md")
	files = append(append([]string{"../README.md"}, files...), examples...)
	var blocks []block
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for {
			m := fence.FindStringSubmatchIndex(text)
			if m == nil {
				break
			}
			lang := text[m[2]:m[3]]
			rest := text[m[1]:]
			end := strings.Index(rest, "\n```")
			if end < 0 {
				t.Fatalf("%s: an unclosed code block", f)
			}
			line := strings.Count(string(b)[:len(b)-len(text)+m[0]], "\n") + 1
			blocks = append(blocks, block{file: f, lang: lang, text: rest[:end+1], line: line})
			text = rest[end+4:]
		}
	}
	return blocks
}

func TestDocsUsageIsHelp(t *testing.T) {
	help, err := exec.Command(binary(t), "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range docBlocks(t) {
		if b.file == "../README.md" && strings.HasPrefix(b.text, "Usage: ruvoy") {
			equal(t, "README's usage", b.text, string(help))
			return
		}
	}
	t.Fatal("README.md shows no usage block")
}

// Paths in the docs' example configs that stand for an app of the reader's.
var examplePaths = strings.NewReplacer(
	"/srv/app/config.ru", "examples/hello/config.ru",
	"/srv/app/public", "examples/rails/public",
	"/srv/app/storage", "examples/rails",
)

func TestDocsConfigsValidate(t *testing.T) {
	repo := repoCopy(t)
	n := 0
	for _, b := range docBlocks(t) {
		var args []string
		switch {
		case b.lang == "json" && strings.Contains(b.text, `"apps"`):
			args = []string{"validate", "--config", "doc.json"}
		case b.lang == "caddyfile":
			args = []string{"adapt", "--config", "Caddyfile.doc", "--adapter", "caddyfile", "--validate"}
		case b.lang == "haproxy": // a backend: the balancers' tests wrap it, and check it
			haproxyConfig(t, lookBalancer(t, "haproxy"), b.text, freePort(t))
			n++
			continue
		case b.lang == "nginx": // an upstream and a server, likewise
			nginxConfig(t, lookBalancer(t, "nginx"), b.text)
			n++
			continue
		default:
			continue
		}
		n++
		name := args[2]
		os.WriteFile(filepath.Join(repo, name), []byte(examplePaths.Replace(b.text)), 0o644)
		c := exec.Command(binary(t), args...)
		c.Dir = repo
		c.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("%s:%d: the %s config does not validate: %v\n%s", b.file, b.line, b.lang, err, out)
		}
	}
	if n < 6 {
		t.Fatalf("only %d configs found in the docs", n)
	}
}

func TestDocsCommandsRun(t *testing.T) {
	repo := repoCopy(t)
	bin := filepath.Dir(binary(t))
	n := 0
	for _, b := range docBlocks(t) {
		if b.lang == "bash" || b.lang == "shell" || b.lang == "console" {
			t.Errorf("%s:%d: commands go in sh blocks, which this test runs", b.file, b.line)
		}
		if b.lang != "sh" {
			continue
		}
		n++
		name := strings.ReplaceAll(strings.TrimPrefix(b.file, "../"), "/", "-")
		t.Run(fmt.Sprintf("%s:%d", name, b.line), func(t *testing.T) {
			script := shellScript(t, b.text)
			c := exec.Command("bash", "-c", script)
			c.Dir = repo
			c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
				"PORT="+freePort(t), "USERS_PORT="+freePort(t), "RACK_ENV=")
			out, err := runWithTimeout(c, 10*time.Minute)
			if err != nil {
				t.Fatalf("%s:%d: %v\nscript:\n%s\noutput:\n%s", b.file, b.line, err, script, out)
			}
		})
	}
	if n < 6 {
		t.Fatalf("only %d sh blocks found in the docs", n)
	}
}

// A server's command line: the docs run it in the foreground; the test
// starts it in the background and waits for $PORT.
func startsServer(line string) bool {
	fields := strings.Fields(line)
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		fields = fields[1:] // VAR=value prefixes
	}
	if len(fields) == 0 {
		return false
	}
	switch {
	case fields[0] == "make":
		return len(fields) > 1 && fields[1] == "serve"
	case filepath.Base(fields[0]) == "rails":
		return len(fields) > 1 && (fields[1] == "server" || fields[1] == "s")
	case fields[0] == "rackup":
		return true
	case filepath.Base(fields[0]) != "ruvoy":
		return false
	}
	for _, arg := range fields[1:] {
		switch arg {
		case "-v", "--version", "-h", "--help", "--print-config", "list-modules", "version", "adapt",
			"validate", "fmt", "help", "environ", "build-info", "reload", "stop":
			return false
		}
	}
	return true
}

var fixedPort = regexp.MustCompile(`(localhost|127\.0\.0\.1):(8080|3000|9292)\b|-p (8080|3000|9292)\b`)

// shellScript turns a block into a script: servers go to the background,
// the ports the docs name become $PORT, `make test` (what CI runs, and
// what runs this test) is left out, and a benchmark runs one short round.
func shellScript(t *testing.T, text string) string {
	var b strings.Builder
	b.WriteString(`set -euo pipefail
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM -- -$p 2>/dev/null || kill -TERM $p 2>/dev/null; done; wait' EXIT
wait_port() { for i in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $PORT"; return 1; }
`)
	for _, line := range strings.Split(text, "\n") {
		code := strings.TrimSpace(line)
		if code == "" || strings.HasPrefix(code, "#") {
			continue
		}
		code = fixedPort.ReplaceAllStringFunc(code, func(m string) string {
			if strings.HasPrefix(m, "-p ") {
				return "-p $PORT"
			}
			host, _, _ := strings.Cut(m, ":")
			return host + ":$PORT"
		})
		switch {
		case code == "make test":
			b.WriteString("true # make test: what CI runs\n")
		case code == "make bench" || strings.HasPrefix(code, "bench/run"):
			// A campaign takes an hour: one short round of the harness.
			b.WriteString("bench/run -rounds 1 -duration 1s -servers ruvoy,puma-5 -scenarios noop,ttfb\n")
		case startsServer(code):
			if i := strings.Index(code, " #"); i >= 0 {
				code = strings.TrimSpace(code[:i]) // a comment would swallow the parenthesis
			}
			fmt.Fprintf(&b, "set -m; ( %s ) > server.log 2>&1 & pids+=($!); set +m; wait_port || { cat server.log; exit 1; }\n", code)
		default:
			b.WriteString(code + "\n")
		}
	}
	return b.String()
}

func runWithTimeout(c *exec.Cmd, d time.Duration) (string, error) {
	out := &output{}
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		c.Process.Kill()
		return out.String(), fmt.Errorf("still running after %v", d)
	}
}

// repoCopy copies the checkout (tracked and new files, the built binary)
// with its timestamps, so make sees the binary up to date.
func repoCopy(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	list, err := exec.Command("git", "-C", "..", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(string(list))
	files = append(files, "ruvoy")
	tar := exec.Command("bash", "-c", `cd .. && tar -cf - --files-from=- | tar -xpf - -C "$1"`, "tar", dst)
	tar.Stdin = strings.NewReader(strings.Join(existing(files), "\n"))
	if out, err := tar.CombinedOutput(); err != nil {
		t.Fatalf("copying the checkout: %v\n%s", err, out)
	}
	// The copy's ruvoy is the binary under test.
	if b, err := os.ReadFile(binary(t)); err == nil {
		os.WriteFile(filepath.Join(dst, "ruvoy"), b, 0o755)
	}
	return dst
}

func existing(files []string) []string {
	var out []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join("..", f)); err == nil {
			out = append(out, f)
		}
	}
	return out
}
