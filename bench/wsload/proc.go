package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// groupMem is the resident memory (bytes) and open descriptors of every
// process in process group pgid: a server and whatever it forked.
func groupMem(pgid int) (rss int64, fds int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state ppid pgrp ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 22 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		pages, _ := strconv.ParseInt(f[21], 10, 64) // rss, in pages
		rss += pages * int64(os.Getpagesize())
		dir := filepath.Dir(stat)
		if entries, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
			fds += len(entries)
		}
	}
	return rss, fds
}
