package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// IdentifyField names one Identify Controller field as nvme-cli's JSON spells it, with the
// spellings another tool (rbctl identify --json) may use for it.
type IdentifyField struct {
	Key     string   // nvme-cli id-ctrl JSON key
	Aliases []string // accepted keys elsewhere, compared case-insensitively without '_' and '-'
	Numeric bool
}

// ComparedFields are the fields the harness compares between nvme-cli and rbctl.
var ComparedFields = []IdentifyField{
	{Key: "sn", Aliases: []string{"sn", "serial", "serialnumber"}},
	{Key: "mn", Aliases: []string{"mn", "model", "modelnumber"}},
	{Key: "fr", Aliases: []string{"fr", "firmware", "firmwarerevision", "firmwarerev", "fwrev"}},
	{Key: "ctratt", Aliases: []string{"ctratt"}, Numeric: true},
	{Key: "oncs", Aliases: []string{"oncs"}, Numeric: true},
}

// FieldResult is the outcome of comparing one field.
type FieldResult struct {
	Key       string
	Want, Got string // normalised values; Got is empty when Missing
	Missing   bool   // the other document has no such field
	Equal     bool
}

// ErrNotJSON: a document is not a JSON object.
var ErrNotJSON = errors.New("not a JSON object")

// CompareIdentifyJSON compares nvme-cli's `id-ctrl -o json` output with another tool's JSON,
// field by field. Strings compare without trailing padding, numbers by value (the other tool
// may print them as numbers or as "0x..." strings). A field the other tool does not print is
// reported Missing, not unequal.
func CompareIdentifyJSON(nvmeCLI, other []byte) ([]FieldResult, error) {
	var ref map[string]any
	if err := json.Unmarshal(nvmeCLI, &ref); err != nil {
		return nil, fmt.Errorf("nvme-cli JSON: %w: %v", ErrNotJSON, err)
	}
	var doc any
	if err := json.Unmarshal(other, &doc); err != nil {
		return nil, fmt.Errorf("compared JSON: %w: %v", ErrNotJSON, err)
	}
	out := make([]FieldResult, 0, len(ComparedFields))
	for _, f := range ComparedFields {
		rv, ok := ref[f.Key]
		if !ok {
			return nil, fmt.Errorf("nvme-cli JSON has no %q field", f.Key)
		}
		want, err := normalise(rv, f.Numeric)
		if err != nil {
			return nil, fmt.Errorf("nvme-cli field %q: %w", f.Key, err)
		}
		r := FieldResult{Key: f.Key, Want: want}
		v, found := FindField(doc, f.Aliases...)
		if !found {
			r.Missing = true
		} else if got, err := normalise(v, f.Numeric); err != nil {
			r.Got = fmt.Sprint(v)
		} else {
			r.Got = got
			r.Equal = got == want
		}
		out = append(out, r)
	}
	return out, nil
}

// FindField searches a decoded JSON document depth-first (object keys in sorted order) for
// the first key matching one of aliases and returns its value.
func FindField(doc any, aliases ...string) (any, bool) {
	switch d := doc.(type) {
	case map[string]any:
		keys := sortedKeys(d)
		for _, k := range keys {
			switch d[k].(type) {
			case map[string]any, []any:
				continue
			}
			if matchKey(k, aliases) {
				return d[k], true
			}
		}
		for _, k := range keys {
			if v, ok := FindField(d[k], aliases...); ok {
				return v, true
			}
		}
	case []any:
		for _, e := range d {
			if v, ok := FindField(e, aliases...); ok {
				return v, true
			}
		}
	}
	return nil, false
}

func matchKey(k string, aliases []string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
	for _, a := range aliases {
		if n == a {
			return true
		}
	}
	return false
}

func normalise(v any, numeric bool) (string, error) {
	if !numeric {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a string, got %T", v)
		}
		return strings.TrimRight(s, " \x00"), nil
	}
	switch x := v.(type) {
	case float64:
		if x < 0 || x != float64(uint64(x)) {
			return "", fmt.Errorf("not an unsigned integer: %v", x)
		}
		return strconv.FormatUint(uint64(x), 10), nil
	case string:
		u, err := strconv.ParseUint(strings.TrimSpace(x), 0, 64)
		if err != nil {
			return "", err
		}
		return strconv.FormatUint(u, 10), nil
	}
	return "", fmt.Errorf("want a number, got %T", v)
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
