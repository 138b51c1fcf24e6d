// Package units parses the byte counts given on rbctl's command line and in device specs.
//
// There is one grammar, used everywhere a size is read:
//
//	size   = number [ unit ]          (spaces allowed around either)
//	number = decimal integer           4096, 1_000_000, 0100 (leading zeros never mean octal)
//	       | 0x / 0o / 0b integer      0x1000, 0o777, 0b1000 (Go syntax, _ separators allowed)
//	       | decimal with a fraction   1.5, .5, 2e3
//	unit   = B | K | KB | KiB | M | MB | MiB | G | GB | GiB | T | TB | TiB   (any case)
//
// Every unit is a power of 1024: KB and KiB both mean 1024 bytes, because sizes here are
// device and buffer sizes, which are binary. A fractional result is rounded down to a whole
// byte (1.5K is 1536, 0.1K is 102). Negative numbers (other than -0), NaN, infinities and results above
// the int64 range are refused. A hexadecimal number takes no B unit, since B is one of its
// digits: 0x1B is 27 bytes, 0x1000B is 65547.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxSizeText bounds the input ParseSize reads; no valid size is longer.
const MaxSizeText = 128

// ErrSize is the error every ParseSize failure wraps.
var ErrSize = errors.New("cannot parse size")

// binary units, longest suffix first so that "KiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize parses a byte count in the grammar of the package comment.
func ParseSize(s string) (int64, error) {
	if len(s) > MaxSizeText {
		return 0, fmt.Errorf("%w: %d characters (at most %d)", ErrSize, len(s), MaxSizeText)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w: empty", ErrSize)
	}
	bad := func() (int64, error) {
		return 0, fmt.Errorf("%w %q (use bytes or a number with a binary unit: 4096, 64K, 1.5GiB, 0x1000)", ErrSize, s)
	}
	hex := len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')
	mult := int64(1)
	up := strings.ToUpper(t)
	for _, u := range sizeUnits {
		if !strings.HasSuffix(up, u.suffix) || (hex && u.suffix == "B") {
			continue
		}
		mult, t = u.mult, strings.TrimSpace(t[:len(t)-len(u.suffix)])
		break
	}
	if t == "" {
		return bad()
	}
	if n, ok := parseInt(t); ok {
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%w %q: more than %d bytes", ErrSize, s, int64(math.MaxInt64))
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return bad()
	}
	// float64(MaxInt64) is 2^63 exactly; anything at or above it does not fit an int64.
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%w %q: more than %d bytes", ErrSize, s, int64(math.MaxInt64))
	}
	return int64(v), nil
}

// parseInt reads a non-negative integer: decimal (leading zeros allowed, never octal) or
// Go-prefixed 0x/0o/0b, with Go's _ separators.
func parseInt(t string) (int64, bool) {
	base := 0
	if len(t) > 1 && t[0] == '0' && (t[1] >= '0' && t[1] <= '9' || t[1] == '_') {
		base = 10 // strconv would read a leading zero as octal; "0100" is one hundred here
	}
	n, err := strconv.ParseInt(t, base, 64)
	return n, err == nil && n >= 0
}
