// Package settings declares each of ruvoy's settings once (table.go): its
// flag and --help text for `ruvoy config.ru`, its default, how its value
// is read and checked, and the handler's JSON field it sets, which is also
// its key in the Caddyfile's ruvoy directive. The command line
// (cmd/ruvoy) registers its flags and prints --help from the table, and
// the Caddyfile directive (caddy/caddyfile.go) reads its keys from it;
// names a setting had before are in Renames (renames.go).
package settings

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// A Setting is one thing a user of ruvoy sets.
type Setting struct {
	Flag  string // the long flag, without --; "" for none
	Short string // the one-letter flag, or ""
	Arg   string // the value's name in --help (PORT, N, SECONDS); "" for a switch
	Help  string // what --help says, defaults included, as one paragraph
	Alias string // a hidden flag of the same meaning, or ""

	// Default is the value the command line starts from, read as a
	// flag's text would be ("" for none: then the handler's own default
	// applies); Env names an environment variable that replaces it when
	// set. --help says both in Help's words.
	Default, Env string

	// JSON is the handler's JSON field the setting sets, and its key in
	// the Caddyfile directive (one name per setting); "" for a flag the
	// command line makes into Caddy's server config (cmd/ruvoy/config.go).
	JSON string

	Read Reader // how a value is read and checked

	// Needs is the JSON field of a setting this one needs, which Unmet
	// checks; Why says why in its error.
	Needs, Why string
}

// FlagName is the flag as errors name it: the short one when there is
// one, as users type it.
func (s *Setting) FlagName() string {
	if s.Short != "" {
		return "-" + s.Short
	}
	return "--" + s.Flag
}

// flagUsage is the flag with its value and the variable that can stand
// for it: --workers N (or WEB_CONCURRENCY).
func (s *Setting) flagUsage() string {
	u := "--" + s.Flag
	if s.Arg != "" {
		u += " " + s.Arg
	}
	if s.Env != "" {
		u += " (or " + s.Env + ")"
	}
	return u
}

// ReadFlag reads a flag's text (or Default, or Env's value); name is the
// option as the error names it.
func (s *Setting) ReadFlag(name, text string) (any, error) {
	return s.Read.Flag(name, text)
}

// ReadCaddyfile reads one argument of the setting's Caddyfile key ("" for
// a switch), which errors name.
func (s *Setting) ReadCaddyfile(text string) (any, error) {
	if s.Read.Caddyfile != nil {
		return s.Read.Caddyfile(s.JSON, text)
	}
	return s.Read.Flag(s.JSON, text)
}

// ByFlag is the setting of a flag (its long name), or nil.
func ByFlag(name string) *Setting {
	for i := range Table {
		if Table[i].Flag == name && name != "" {
			return &Table[i]
		}
	}
	return nil
}

// ByJSON is the setting of a handler's JSON field (a Caddyfile key), or
// nil.
func ByJSON(name string) *Setting {
	for i := range Table {
		if Table[i].JSON == name && name != "" {
			return &Table[i]
		}
	}
	return nil
}

// Values are the handler settings a command line or a Caddyfile gives, by
// JSON field, as read by their Reader: Decode puts them in the handler.
type Values map[string]any

// Add sets s's value, or adds to it when its values add up.
func (v Values) Add(s *Setting, value any) {
	if old, ok := v[s.JSON].([]string); ok && s.Read.Adds {
		value = append(old, value.([]string)...)
	}
	v[s.JSON] = value
}

// Decode sets the given fields of dst (the handler) through its JSON,
// strictly: a field dst lacks is an error.
func (v Values) Decode(dst any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(dst)
}

// Unmet is the error of the first setting the handler gives (non-zero in
// its JSON) without the one it Needs, worded for flags or for the JSON
// and Caddyfile; nil when there is none.
func Unmet(handler any, asFlags bool) error {
	raw, err := json.Marshal(handler)
	if err != nil {
		return err
	}
	var given map[string]json.RawMessage
	if err := json.Unmarshal(raw, &given); err != nil {
		return err
	}
	for i := range Table {
		s := &Table[i]
		if s.Needs == "" || !nonZero(given[s.JSON]) || nonZero(given[s.Needs]) {
			continue
		}
		if need := ByJSON(s.Needs); asFlags {
			return fmt.Errorf("--%s %s: give %s too", s.Flag, s.Why, need.flagUsage())
		}
		return fmt.Errorf("%s %s: give %s too", s.JSON, s.Why, s.Needs)
	}
	return nil
}

// nonZero says whether a JSON value is given: present, and not null,
// false or 0 (what omitempty leaves out).
func nonZero(raw json.RawMessage) bool {
	switch string(raw) {
	case "", "null", "false", "0":
		return false
	}
	return true
}
