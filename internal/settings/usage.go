package settings

import (
	"strings"
)

const (
	helpColumn = 29 // where a flag's help starts
	helpWidth  = 98 // the longest line --help prints
)

// Usage is --help's list of flags, in the table's order: each flag, its
// value's name, and its help wrapped beside it.
func Usage() string {
	var b strings.Builder
	for i := range Table {
		if s := &Table[i]; s.Flag != "" {
			writeUsage(&b, s)
		}
	}
	return b.String()
}

func writeUsage(b *strings.Builder, s *Setting) {
	name := "        --" + s.Flag
	if s.Short != "" {
		name = "    -" + s.Short + ", --" + s.Flag
	}
	if s.Arg != "" {
		name += " " + s.Arg
	}
	lines := wrap(s.Help, helpWidth-helpColumn)
	if len(lines) == 0 || len(name) >= helpColumn {
		b.WriteString(name + "\n") // a long name has a line of its own
		name = ""
	}
	for _, line := range lines {
		b.WriteString(name + strings.Repeat(" ", helpColumn-len(name)) + line + "\n")
		name = ""
	}
}

// wrap cuts text into lines of at most width, between words.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
