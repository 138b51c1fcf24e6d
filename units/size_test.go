package units

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{
		// plain bytes, with and without B
		"0": 0, "4096": 4096, "4096B": 4096, " 4096 b ": 4096, "0100": 100, "01_000": 1000, "0_100": 100, "1_000_000": 1000000, "+5": 5,
		// every unit spelling, any case (all binary)
		"64K": 64 << 10, "64k": 64 << 10, "64KB": 64 << 10, "64KiB": 64 << 10, "64kib": 64 << 10, "64 K": 64 << 10,
		"3M": 3 << 20, "3MB": 3 << 20, "3MiB": 3 << 20, "2g": 2 << 30, "2GB": 2 << 30, "2GiB": 2 << 30,
		"1T": 1 << 40, "1TB": 1 << 40, "1TiB": 1 << 40,
		// fractions, rounded down to whole bytes
		"1.5G": 3 << 29, "1.5GiB": 3 << 29, ".5K": 512, "0.1K": 102, "2e3": 2000, "1.5": 1,
		// Go integer prefixes; in hex a trailing B is a digit
		"0x1000": 4096, "0X10K": 16 << 10, "0x1B": 27, "0x10KB": 16 << 10, "0o17": 15, "0b101": 5,
		// the limits
		"9223372036854775807": math.MaxInt64, "8388607T": 8388607 << 40,
	} {
		got, err := ParseSize(s)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{
		"", " ", "B", "K", "KiB", "-1", "-1K", "4Q", "64KI", "64IB", "64 KiB B", "1.2.3", "nan", "NaNK", "inf", "+Inf",
		"9223372036854775808", "8388608T", "9.3e18", "1e300", "0x", "1__0", "0xG",
		string(make([]byte, MaxSizeText+1)),
	} {
		if got, err := ParseSize(s); !errors.Is(err, ErrSize) {
			t.Errorf("ParseSize(%q) = %d, %v; want ErrSize", s, got, err)
		}
	}
}

// Every size that parses is non-negative, and the bytes printed back parse to the same value.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4096", "64K", "1.5GiB", "0x1B", "0100", "nan", "-0", "8388607T", "1e18K", " 2 g "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, ErrSize) {
				t.Fatalf("%q: error %v does not wrap ErrSize", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("%q: negative size %d", s, n)
		}
		if m, err := ParseSize(strconv.FormatInt(n, 10)); err != nil || m != n {
			t.Fatalf("%q = %d, but its decimal form parses to %d, %v", s, n, m, err)
		}
	})
}
