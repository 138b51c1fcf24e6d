package placement

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSpec is wrapped by every Parse error.
var ErrSpec = errors.New("placement: bad policy")

// ErrOracleOnly (with ErrSpec): an oracle:* reference names no placement policy a device
// runs; only the simulator, which replays the op stream, evaluates it.
var ErrOracleOnly = errors.New("placement: an oracle is not a policy")

// Known lists the policy names Parse accepts (compositions join one data policy to
// metadata-class with '+').
func Known() []string {
	return []string{"none", "static:N", "round-robin", "cache-salt", "cache-salt:pin=SALT=H/...", "cache-salt:hash", "cache-salt:bytes", "cache_salt_prefix", "cache_salt_rank[:ranks=N]", "hotness", "lifetime", "metadata-class"}
}

// Parse builds a policy from a flag string for a device with the given number of
// placement handles. Grammar: a data policy (none, static:N, round-robin, cache-salt
// (alias cache-salt:assign), cache-salt:pin=SALT=H/SALT=H/... (cache-salt with those salts
// on fixed handles; salts are case-sensitive and cannot contain '/' or '+'), cache-salt:hash,
// cache-salt:bytes (old spelling cache-salt:rank), LMCache's cache_salt_prefix and
// cache_salt_rank (options :ranks=N local ranks per bucket, :handles=H/H/... the pool in
// order), hotness, lifetime), metadata-class alone, or metadata-class joined with one data
// policy by '+' in either order ("metadata-class+cache-salt").
// With metadata-class, handle handles-1 is reserved for metadata and the data policy gets
// handles 0..handles-2. "" means none.
func Parse(spec string, handles int) (Policy, error) {
	// Names are case-insensitive; salts (cache-salt:pin=...) are not, so only the names are
	// folded.
	spec = strings.TrimSpace(spec)
	if l := strings.ToLower(spec); l == "" || l == "none" {
		return NewNone(), nil
	}
	parts := strings.Split(spec, "+")
	meta := false
	var data []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("%w: empty component in %q", ErrSpec, spec)
		case strings.ToLower(p) == "metadata-class":
			if meta {
				return nil, fmt.Errorf("%w: metadata-class given twice in %q", ErrSpec, spec)
			}
			meta = true
		default:
			data = append(data, p)
		}
	}
	if len(data) > 1 {
		return nil, fmt.Errorf("%w: %q combines %d data policies (%s); only metadata-class composes with one data policy",
			ErrSpec, spec, len(data), strings.Join(data, ", "))
	}
	if handles < 1 {
		return nil, fmt.Errorf("%w: policy %q needs placement handles, but the device has none (no FDP); use 'none'", ErrSpec, spec)
	}
	dataHandles := handles
	if meta {
		if handles < 2 {
			return nil, fmt.Errorf("%w: metadata-class needs at least 2 handles (one for metadata, one for data), device has %d", ErrSpec, handles)
		}
		dataHandles = handles - 1
	}
	var inner Policy
	if len(data) == 1 {
		var err error
		if inner, err = parseData(data[0], dataHandles, handles, meta); err != nil {
			return nil, err
		}
	}
	if meta {
		return NewMetadataClass(handles, inner), nil
	}
	return inner, nil
}

func parseData(raw string, n, handles int, meta bool) (Policy, error) {
	p := strings.ToLower(raw)
	switch p {
	case "none":
		return NewNone(), nil
	case "round-robin", "roundrobin", "rr":
		return NewRoundRobin(n), nil
	case "cache-salt", "cache-salt:assign":
		return NewCacheSalt(n), nil
	case "cache-salt:hash":
		return NewCacheSaltHash(n), nil
	case "cache-salt:bytes", "cache-salt:rank": // cache-salt:rank: the old name, kept as an alias
		return NewCacheSaltBytes(n), nil
	case "hotness":
		return NewHotness(n), nil
	case "lifetime":
		return NewLifetime(n), nil
	}
	if arg, ok := strings.CutPrefix(p, "static:"); ok {
		h, err := strconv.Atoi(arg)
		if err != nil || h < 0 {
			return nil, fmt.Errorf("%w: %q: static needs a handle index >= 0, as in static:1", ErrSpec, p)
		}
		if h >= n {
			if meta {
				return nil, fmt.Errorf("%w: %s needs at least %d data handles, device has %d handles and metadata-class reserves handle %d",
					ErrSpec, p, h+1, handles, handles-1)
			}
			return nil, fmt.Errorf("%w: %s needs at least %d handles, device has %d", ErrSpec, p, h+1, handles)
		}
		return NewStatic(h), nil
	}
	if strings.HasPrefix(p, "cache_salt_prefix") {
		return parseSaltBuckets(p, false, n)
	}
	if strings.HasPrefix(p, "cache_salt_rank") {
		return parseSaltBuckets(p, true, n)
	}
	if strings.HasPrefix(p, "cache-salt:pin=") {
		pins, err := parsePins(raw[len("cache-salt:pin="):])
		if err != nil {
			return nil, err
		}
		for salt, h := range pins {
			if h >= n && meta {
				return nil, fmt.Errorf("%w: cache-salt:pin: salt %q on handle %d, but the device has %d handles and metadata-class reserves handle %d",
					ErrSpec, salt, h, handles, handles-1)
			}
		}
		return NewCacheSaltPinned(n, pins)
	}
	if strings.HasPrefix(p, "oracle") {
		return nil, fmt.Errorf("%w (%w): %q is a future-knowledge reference, not a policy: only the simulator runs it (it replays the op stream twice)", ErrSpec, ErrOracleOnly, p)
	}
	if p == "static" {
		return nil, fmt.Errorf("%w: static needs a handle index, as in static:1", ErrSpec)
	}
	return nil, fmt.Errorf("%w: unknown policy '%s'; known: %s", ErrSpec, p, strings.Join(Known(), ", "))
}
