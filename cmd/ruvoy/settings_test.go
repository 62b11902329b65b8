package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ruvoy/ruvoy/internal/settings"
)

var update = flag.Bool("update", false, "rewrite README.md's usage block from --help")

// README.md's usage block is --help, word for word (test/docs_test.go
// holds the binary to it too); -update writes it.
func TestUsageIsReadme(t *testing.T) {
	const readme = "../../README.md"
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "```text\nUsage: ruvoy")
	if start < 0 {
		t.Fatal("README.md shows no usage block")
	}
	start += len("```text\n")
	end := start + strings.Index(text[start:], "```")
	if text[start:end] == usage() {
		return
	}
	if *update {
		os.WriteFile(readme, []byte(text[:start]+usage()+text[end:]), 0o644)
		return
	}
	t.Errorf("README.md's usage block is not --help (go test ./cmd/ruvoy -run TestUsageIsReadme -update writes it):\n%s", usage())
}

// Every flag, and every former name of one, is in the docs: the
// options table of docs/cli.md (or docs/configuration.md).
func TestEveryFlagIsDocumented(t *testing.T) {
	var docs string
	for _, f := range []string{"../../docs/cli.md", "../../docs/configuration.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs += string(b)
	}
	names := []string{}
	for _, s := range settings.Table {
		if s.Flag != "" {
			names = append(names, s.Flag)
		}
		if s.Alias != "" {
			names = append(names, s.Alias)
		}
	}
	for _, r := range settings.RenamedIn(settings.InFlags) {
		names = append(names, r.Old)
	}
	for _, name := range names {
		if !regexp.MustCompile(`--` + name + `([^a-z0-9-]|$)`).MatchString(docs) {
			t.Errorf("--%s is not in docs/cli.md", name)
		}
		if !strings.Contains(usage(), "--"+name+" ") && !strings.Contains(usage(), "--"+name+"\n") && settings.ByFlag(name) != nil {
			t.Errorf("--%s is not in --help", name)
		}
	}
}

// Every flag has a place its value lands in: given alone (with what it
// needs), it parses and changes the options.
func TestEveryFlagSetsSomething(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("token\n"), 0o600)
	examples := map[string]string{
		"PORT": "8081", "ADDRESS": "0.0.0.0", "ENV": "test", "N": "2", "MIB": "512", "SECONDS": "2", "MS": "250",
		"BYTES": "100", "FILE": file, "DIR": dir, "NAME": "example.com", "NAME=URL[,URL...]": "a=http://x",
		"CIDR[,CIDR...]": "10.0.0.0/8", "PATH": "/up", "FORMAT": "json", "NAME[,NAME...]": "a,b",
	}
	companions := map[string][]string{
		"preload": {"-w", "2"}, "tls-cert": {"--tls-key", file}, "tls-key": {"--tls-cert", file},
		"tls-client-ca": {"--tls-internal"}, "admin-token-file": {"--admin-port", "2019"},
	}
	for _, s := range settings.Table {
		if s.Flag == "" || s.Flag == "help" {
			continue
		}
		args := []string{"--" + s.Flag}
		if s.Arg != "" {
			example, ok := examples[s.Arg]
			if !ok {
				t.Fatalf("--%s: no example of %s", s.Flag, s.Arg)
			}
			args = append(args, example)
		}
		o, err := parseOptions(append(args, companions[s.Flag]...), env())
		if err != nil {
			t.Errorf("%q: %v", args, err)
		}
		// (--tls-cert and --tls-key are each the other's companion.)
		if alone, err := parseOptions(companions[s.Flag], env()); err == nil && reflect.DeepEqual(o, alone) {
			t.Errorf("%q changes no option", args)
		}
	}
}
