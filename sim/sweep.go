package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// Sweep repeats a comparison over the values of one parameter: util (the target
// utilisation), op (over-provisioning), ru (reclaim unit bytes) or size (the device's
// logical bytes, so the cache's size).
type Sweep struct {
	Name   string
	Values []float64
}

// ErrSweep marks a sweep specification that cannot be parsed.
var ErrSweep = errors.New("invalid sweep")

// ParseSweep parses NAME=FROM:TO:STEP or NAME=V1,V2,... (sizes may carry suffixes:
// ru=1G:4G:1G, size=256G,512G,1T).
func ParseSweep(s string) (*Sweep, error) {
	name, rng, ok := strings.Cut(s, "=")
	parts := strings.Split(rng, ":")
	list := strings.Contains(rng, ",")
	if !ok || (len(parts) != 3 && !list) {
		return nil, fmt.Errorf("%w: %q is not NAME=FROM:TO:STEP or NAME=V1,V2,..., e.g. util=0.5:0.95:0.05", ErrSweep, s)
	}
	switch name {
	case "util", "op", "ru", "size":
	default:
		return nil, fmt.Errorf("%w: %q: can sweep util, op, ru or size", ErrSweep, s)
	}
	num := func(p string) (float64, error) {
		x, err := units.ParseSize(p)
		if err != nil || strings.ContainsAny(p, ".") {
			f, ferr := strconv.ParseFloat(p, 64)
			if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, fmt.Errorf("%w: %q: %q is not a number", ErrSweep, s, p)
			}
			return f, nil
		}
		return float64(x), nil
	}
	if list {
		sw := &Sweep{Name: name}
		items := strings.Split(rng, ",")
		if len(items) > 1000 {
			return nil, fmt.Errorf("%w: %q has more than 1000 values", ErrSweep, s)
		}
		for _, p := range items {
			f, err := num(p)
			if err != nil {
				return nil, err
			}
			if f <= 0 || slices.Contains(sw.Values, f) {
				return nil, fmt.Errorf("%w: %q: values must be positive and distinct", ErrSweep, s)
			}
			sw.Values = append(sw.Values, f)
		}
		return sw, nil
	}
	var v [3]float64
	for i, p := range parts {
		f, err := num(p)
		if err != nil {
			return nil, err
		}
		v[i] = f
	}
	if v[2] <= 0 || v[1] < v[0] {
		return nil, fmt.Errorf("%w: %q: want FROM ≤ TO and STEP > 0", ErrSweep, s)
	}
	if (v[1]-v[0])/v[2] > 10000 {
		return nil, fmt.Errorf("%w: %q has more than 10000 values", ErrSweep, s)
	}
	if v[0]+v[2] == v[0] || v[1]+v[2] == v[1] {
		return nil, fmt.Errorf("%w: %q: STEP is below the precision of FROM and TO", ErrSweep, s)
	}
	// A count, not a float comparison, ends the loop: FROM + i·STEP may not move at all in
	// floating point.
	n := int(math.Floor((v[1]-v[0])/v[2] + 1e-6))
	sw := &Sweep{Name: name}
	for i := 0; i <= n; i++ {
		sw.Values = append(sw.Values, math.Round((v[0]+float64(i)*v[2])*1e9)/1e9)
	}
	return sw, nil
}

// label names a run at sweep value v ("cache-salt @ util=0.9").
func (sw *Sweep) label(pol string, v float64) string {
	if sw == nil {
		return pol
	}
	if sw.Name == "size" {
		return pol + " @ " + sw.Name + "=" + units.FormatSize(int64(v))
	}
	return pol + " @ " + sw.Name + "=" + strconv.FormatFloat(v, 'g', 4, 64)
}

// Geometry derives the reclaim unit and the FTL mapping unit of a model of capacity bytes
// holding slotBytes slots: ru 0 is capacity/512; unit 0 is the largest power of two ≤
// slot/16 and ≤ RU/256, at least 4 KiB. The RU is rounded down to whole units.
func Geometry(capacity, slotBytes, ru, unit int64) (int64, int64, error) {
	if ru == 0 {
		ru = capacity / 512
	}
	if unit == 0 {
		unit = 4096
		for unit*2 <= slotBytes/16 && unit*2 <= ru/256 {
			unit *= 2
		}
	}
	if unit <= 0 || ru < unit {
		return 0, 0, fmt.Errorf("reclaim unit %d must be at least one mapping unit (%d)", ru, unit)
	}
	return ru / unit * unit, unit, nil
}
