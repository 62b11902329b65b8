package settings

import (
	"encoding/json"
	"fmt"
	"strings"
)

// In is where a name is read.
type In int

const (
	InFlags           In = iota // a flag of `ruvoy config.ru`
	InHandlerJSON               // the handler's JSON; "upstream.clusters": a key inside "upstream"
	InAppJSON                   // the "ruvoy" app's JSON (caddy/upstreams.go)
	InCaddyfile                 // the ruvoy directive; "upstream.clusters": inside its upstream block
	InCaddyfileOption           // the Caddyfile's global options
)

// A Rename is a name a setting had before.
type Rename struct {
	In       In
	Old, New string
	Refused  bool // the old name is an error that names the new; else it still works, with a warning
}

// Renames is every former name. (The Ruby side keeps one of its own:
// Ruvoy::Upstream#clusters, lib/ruvoy/upstream.rb.)
var Renames = []Rename{
	// --hold-warn was --stall-warn.
	{In: InFlags, Old: "stall-warn", New: "hold-warn"},
	{In: InHandlerJSON, Old: "stall_warn", New: "hold_warn"},
	{In: InCaddyfile, Old: "stall_warn", New: "hold_warn"},
	// Upstreams were clusters, a word cluster mode (-w) uses for its workers.
	{In: InFlags, Old: "cluster", New: "upstream"},
	{In: InHandlerJSON, Old: "upstream.clusters", New: "upstream.upstreams"},
	{In: InAppJSON, Old: "clusters", New: "upstreams"},
	{In: InCaddyfile, Old: "upstream.clusters", New: "upstream.upstreams"},
	{In: InCaddyfileOption, Old: "ruvoy_cluster", New: "ruvoy_upstream"},
	// One name per setting, as in the JSON config and the flags.
	{In: InCaddyfile, Old: "max_body_size", New: "max_body_bytes", Refused: true},
	{In: InCaddyfile, Old: "max_inflight_body_size", New: "max_inflight_body_bytes", Refused: true},
	{In: InCaddyfile, Old: "upstream.max_response_size", New: "upstream.max_response_bytes", Refused: true},
}

// Message is the warning of a name that still works, or the error of one
// that is refused.
func (r Rename) Message() string {
	switch {
	case r.Refused:
		return fmt.Sprintf("%s is now called %s", last(r.Old), last(r.New))
	case r.In == InFlags:
		return fmt.Sprintf("--%s is deprecated: it is now --%s (same value)", r.Old, r.New)
	case r.In == InHandlerJSON:
		return fmt.Sprintf("the handler's %q is deprecated: it is now %q", r.Old, r.New)
	case r.In == InAppJSON:
		return fmt.Sprintf("the \"ruvoy\" app's %q is deprecated: it is now %q", r.Old, r.New)
	case r.In == InCaddyfile:
		return fmt.Sprintf("the ruvoy directive's %s is deprecated: it is now %s", r.Old, r.New)
	}
	return fmt.Sprintf("the Caddyfile option %s is deprecated: it is now %s", r.Old, r.New)
}

func last(dotted string) string { return dotted[strings.LastIndex(dotted, ".")+1:] }

// Renamed is the rename of a former name in, if name is one.
func Renamed(in In, name string) (Rename, bool) {
	for _, r := range Renames {
		if r.In == in && r.Old == name {
			return r, true
		}
	}
	return Rename{}, false
}

// RenamedIn is every rename in.
func RenamedIn(in In) []Rename {
	var out []Rename
	for _, r := range Renames {
		if r.In == in {
			out = append(out, r)
		}
	}
	return out
}

// RenameJSON moves what a JSON object gives under a former name (in) to
// the new name, and returns the object and a warning for each. A value
// already under the new name is joined: lists add up, objects merge, and
// otherwise the new name's wins. What is not an object is left to the
// decoder to refuse.
func RenameJSON(in In, raw []byte) ([]byte, []string, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw, nil, nil
	}
	var warnings []string
	for _, r := range RenamedIn(in) {
		moved, err := move(obj, strings.Split(r.Old, "."), strings.Split(r.New, "."))
		if err != nil {
			return nil, nil, err
		}
		if moved {
			warnings = append(warnings, r.Message())
		}
	}
	if warnings == nil {
		return raw, nil, nil
	}
	out, err := json.Marshal(obj)
	return out, warnings, err
}

// move moves obj's value at the path old to the path new, whose parents
// are old's.
func move(obj map[string]json.RawMessage, old, new []string) (bool, error) {
	v, ok := obj[old[0]]
	if !ok {
		return false, nil
	}
	if len(old) == 1 {
		delete(obj, old[0])
		joined, err := join(obj[new[0]], v)
		obj[new[0]] = joined
		return true, err
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(v, &inner) != nil || inner == nil {
		return false, nil
	}
	moved, err := move(inner, old[1:], new[1:])
	if moved && err == nil {
		obj[old[0]], err = json.Marshal(inner)
	}
	return moved, err
}

// join is the value of a new name given both ways: now's, then was's
// added (lists) or merged under it (objects).
func join(now, was json.RawMessage) (json.RawMessage, error) {
	if now == nil {
		return was, nil
	}
	var nowList, wasList []json.RawMessage
	if json.Unmarshal(now, &nowList) == nil && json.Unmarshal(was, &wasList) == nil && nowList != nil && wasList != nil {
		return json.Marshal(append(nowList, wasList...))
	}
	var nowObj, wasObj map[string]json.RawMessage
	if json.Unmarshal(now, &nowObj) == nil && json.Unmarshal(was, &wasObj) == nil && nowObj != nil && wasObj != nil {
		for k, v := range nowObj {
			wasObj[k] = v
		}
		return json.Marshal(wasObj)
	}
	return now, nil
}
