package wire

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite wire_gen.go from ../vm/wire.h")

// TestGenerated fails when wire_gen.go is not what wire.h says: the two
// sides of the wire cannot drift apart. go generate rewrites it.
func TestGenerated(t *testing.T) {
	h, err := os.ReadFile("../vm/wire.h")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(h)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("wire_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("wire_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("wire_gen.go does not match internal/vm/wire.h: run go generate ./internal/wire")
	}
}

var (
	enumRE   = regexp.MustCompile(`(?s)enum\s*\{(.*?)\};`)
	entryRE  = regexp.MustCompile(`^(RV_[A-Z0-9_]+)(?:\s*=\s*(.+))?$`)
	defineRE = regexp.MustCompile(`(?m)^#define (RV_[A-Z0-9_]+) (0x[0-9a-fA-F]+|[0-9]+)\s*$`)
	namesRE  = regexp.MustCompile(`(?s)#define RV_HEADER_NAMES(.*?)\n\n`)
)

// generate turns wire.h's enums and numeric defines into Go constants
// (RV_FLAG_TOO_LARGE becomes FlagTooLarge) and RV_HEADER_NAMES into
// HeaderNames. An enumerator whose value is not a plain number expression
// (offsetof) is C's alone.
func generate(h []byte) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated from internal/vm/wire.h by gen_test.go; DO NOT EDIT.\n\npackage wire\n\n")
	values := map[string]int64{}
	for _, m := range enumRE.FindAllSubmatch(h, -1) {
		next := int64(0)
		var block strings.Builder
		for _, e := range enumEntries(string(m[1])) {
			f := entryRE.FindStringSubmatch(e.code)
			if f == nil {
				return nil, fmt.Errorf("wire.h: cannot read enumerator %q", e.code)
			}
			v := next
			if f[2] != "" {
				x, err := eval(f[2], values)
				if err != nil {
					continue // offsetof and the like: C's alone
				}
				v = x
			}
			values[f[1]] = v
			next = v + 1
			if e.comment != "" {
				fmt.Fprintf(&block, "\t// %s\n", e.comment)
			}
			fmt.Fprintf(&block, "\t%s = %d\n", goName(f[1]), v)
		}
		if block.Len() > 0 {
			b.WriteString("const (\n" + block.String() + ")\n\n")
		}
	}
	for _, m := range defineRE.FindAllSubmatch(h, -1) {
		v, err := strconv.ParseInt(string(m[2]), 0, 64)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "const %s = %d\n\n", goName(string(m[1])), v)
	}
	m := namesRE.FindSubmatch(h)
	if m == nil {
		return nil, fmt.Errorf("wire.h has no RV_HEADER_NAMES")
	}
	b.WriteString("// HeaderNames are the request headers with a code: their index.\nvar HeaderNames = [...]string{\n")
	for _, q := range regexp.MustCompile(`"[^"]*"`).FindAllString(string(m[1]), -1) {
		fmt.Fprintf(&b, "\t%s,\n", q)
	}
	b.WriteString("}\n")
	return format.Source([]byte(b.String()))
}

type enumEntry struct{ code, comment string }

var commentRE = regexp.MustCompile(`(?s)/\*(.*?)\*/`)

// enumEntries splits an enum body into its enumerators, each with its
// comment: the one after it on its line, or else the one above it.
func enumEntries(body string) []enumEntry {
	var out []enumEntry
	above := ""
	sameLine := false // the text since the last enumerator has no newline
	code := func(s string) {
		parts := splitTop(s)
		for i, p := range parts {
			if strings.TrimSpace(p) != "" {
				out = append(out, enumEntry{code: strings.TrimSpace(p), comment: above})
				above = ""
				sameLine = true
			}
			tail := p
			if i < len(parts)-1 {
				tail = ""
			}
			if strings.Contains(tail, "\n") || (strings.TrimSpace(p) == "" && strings.Contains(p, "\n")) {
				sameLine = false
			}
		}
	}
	pos := 0
	for _, m := range commentRE.FindAllStringSubmatchIndex(body, -1) {
		code(body[pos:m[0]])
		var words []string
		for _, line := range strings.Split(body[m[2]:m[3]], "\n") {
			words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "*"))...)
		}
		text := strings.Join(words, " ")
		if sameLine && len(out) > 0 && out[len(out)-1].comment == "" {
			out[len(out)-1].comment = text
		} else {
			above = text
		}
		pos = m[1]
	}
	code(body[pos:])
	return out
}

// splitTop splits s on the commas outside parentheses.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// eval computes "128 << 10", "16", "RV_X + 1".
func eval(expr string, values map[string]int64) (int64, error) {
	f := strings.Fields(expr)
	num := func(s string) (int64, error) {
		if v, ok := values[s]; ok {
			return v, nil
		}
		return strconv.ParseInt(s, 0, 64)
	}
	if len(f) == 1 {
		return num(f[0])
	}
	if len(f) != 3 {
		return 0, fmt.Errorf("cannot evaluate %q", expr)
	}
	x, err := num(f[0])
	if err != nil {
		return 0, err
	}
	y, err := num(f[2])
	if err != nil {
		return 0, err
	}
	switch f[1] {
	case "<<":
		return x << y, nil
	case "*":
		return x * y, nil
	case "+":
		return x + y, nil
	}
	return 0, fmt.Errorf("cannot evaluate %q", expr)
}

// goName is RV_REQ_TLS -> ReqTLS.
func goName(c string) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.TrimPrefix(c, "RV_"), "_") {
		switch part {
		case "TLS", "URI", "FD", "ID":
			b.WriteString(part)
		default:
			b.WriteString(part[:1] + strings.ToLower(part[1:]))
		}
	}
	return b.String()
}
