package lmcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// legacyPrefix starts every raw-block key of LMCache's non-MP backend in extra_config.
const legacyPrefix = "rust_raw_block."

// source is the raw-block object of a config file: its keys without the legacy prefix,
// how each was spelled in the file (for messages), and which ones were read.
type source struct {
	flavor  Flavor
	vals    map[string]any
	spelled map[string]string
	used    map[string]bool
	ignored []Warning // keys outside the raw-block object (legacy engine settings)
}

// newSource finds the raw-block keys in a decoded config file: an MP adapter object
// ({"type": "raw_block", "device_path": ...}), a legacy LMCache config whose extra_config
// holds "rust_raw_block.<key>" entries, or such an extra_config object on its own.
func newSource(top map[string]any) (*source, error) {
	s := &source{vals: map[string]any{}, spelled: map[string]string{}, used: map[string]bool{}}
	if ex, ok := top["extra_config"]; ok {
		m, ok := ex.(map[string]any)
		if !ok {
			return nil, fieldErr("extra_config", "must be an object of \"rust_raw_block.<key>\" entries")
		}
		s.flavor = Legacy
		for k, v := range m {
			if name, ok := strings.CutPrefix(k, legacyPrefix); ok {
				s.add(name, `extra_config["`+k+`"]`, v)
			}
		}
		for k := range top {
			if k != "extra_config" {
				s.ignored = append(s.ignored, Warning{Field: display(k), Message: "LMCache engine setting outside extra_config; not read (rbctl reads rust_raw_block.* keys)"})
			}
		}
		sortWarnings(s.ignored)
		return s, nil
	}
	prefixed, plain := 0, 0
	for k := range top {
		if strings.HasPrefix(k, legacyPrefix) {
			prefixed++
		} else {
			plain++
		}
	}
	if prefixed > 0 && plain > 0 {
		return nil, fieldErr("(top level)", "mixes %d \"rust_raw_block.<key>\" keys (legacy extra_config spelling) with %d MP raw_block keys; use one spelling", prefixed, plain)
	}
	if prefixed > 0 {
		s.flavor = Legacy
		for k, v := range top {
			s.add(strings.TrimPrefix(k, legacyPrefix), k, v)
		}
		return s, nil
	}
	s.flavor = MP
	for k, v := range top {
		s.add(k, k, v)
	}
	return s, nil
}

func (s *source) add(name, spelled string, v any) {
	s.vals[name] = v
	s.spelled[name] = spelled
}

// field is how the file spells a key (also for keys it does not contain).
func (s *source) field(name string) string {
	if sp, ok := s.spelled[name]; ok {
		return display(sp)
	}
	if s.flavor == Legacy {
		return `extra_config["` + legacyPrefix + name + `"]`
	}
	return name
}

// get returns a key's value; a JSON null counts as absent (LMCache's d.get gives None).
func (s *source) get(name string) (any, bool) {
	s.used[name] = true
	v, ok := s.vals[name]
	if v == nil {
		return nil, false
	}
	return v, ok
}

func (s *source) has(name string) bool { _, ok := s.get(name); return ok }

// integer reads an integer field; integral numbers written with a fraction or exponent
// (4096.0, 4e3) are accepted as Python's int() accepts them, anything else is refused.
func (s *source) integer(name string, def int64) (int64, error) {
	v, ok := s.get(name)
	if !ok {
		return def, nil
	}
	return s.toInt(name, v)
}

func (s *source) toInt(name string, v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fieldErr(s.field(name), "%s is not an integer", x)
		}
		return int64(f), nil
	case bool:
		return 0, fieldErr(s.field(name), "must be an integer, not %v", x)
	case string:
		return 0, fieldErr(s.field(name), "must be an integer, not the string %q", x)
	}
	return 0, fieldErr(s.field(name), "must be an integer, not %s", kind(v))
}

// boolean reads a flag: JSON true/false, or 0/1. A string is refused: LMCache's bool()
// would read "false" as true.
func (s *source) boolean(name string, def bool) (bool, error) {
	v, ok := s.get(name)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case json.Number:
		switch string(x) {
		case "0":
			return false, nil
		case "1":
			return true, nil
		}
	case string:
		return false, fieldErr(s.field(name), "must be true or false, not the string %q (LMCache would read any non-empty string as true)", x)
	}
	return false, fieldErr(s.field(name), "must be true or false, not %s", kind(v))
}

// text reads a string field.
func (s *source) text(name, def string) (string, error) {
	v, ok := s.get(name)
	if !ok {
		return def, nil
	}
	x, ok := v.(string)
	if !ok {
		return "", fieldErr(s.field(name), "must be a string, not %s", kind(v))
	}
	return x, nil
}

// unknown lists the keys nothing read, sorted by field.
func (s *source) unknown() []Warning {
	var out []Warning
	for k := range s.vals {
		if !s.used[k] {
			out = append(out, Warning{Field: s.field(k), Message: "unknown raw-block key; ignored"})
		}
	}
	sortWarnings(out)
	return out
}

// display shows a key as a field name; an empty key is shown as "".
func display(k string) string {
	if k == "" {
		return `""`
	}
	return k
}

func sortWarnings(w []Warning) { sort.Slice(w, func(i, j int) bool { return w[i].Field < w[j].Field }) }

// kind names a decoded JSON value's type for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// ErrConfig is wrapped by every error Load returns.
var ErrConfig = errors.New("lmcache config")

// FieldError is a refused field: Field is spelled as in the file (slot_bytes, or
// extra_config["rust_raw_block.slot_bytes"]).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string        { return "lmcache config: " + e.Field + ": " + e.Msg }
func (e *FieldError) Is(target error) bool { return target == ErrConfig }

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}
