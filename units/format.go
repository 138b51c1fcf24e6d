package units

import (
	"fmt"
	"strings"
)

// FormatSize renders n bytes in binary units with one decimal ("1.5 MiB"); below 1 KiB in
// bytes ("512 B"). ParseSize reads the unit part back (to within the rounding).
func FormatSize(n int64) string { return FormatSizePrec(n, 1) }

// FormatSizePrec is FormatSize with prec decimals ("1.00 MiB" for 2).
func FormatSizePrec(n int64, prec int) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.*f %ciB", prec, f, u[i])
}

// exact is the largest binary unit that divides n (n ≥ 1 KiB), or ok false.
func exact(n int64) (v int64, unit string, ok bool) {
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return n / u.m, u.s, true
		}
	}
	return n, "", false
}

// FormatExact renders n exactly in the largest binary unit that divides it ("512 MiB",
// "4097 B"): for sizes a person set and must read back unrounded.
func FormatExact(n int64) string {
	if v, u, ok := exact(n); ok {
		return fmt.Sprintf("%d %siB", v, u)
	}
	return fmt.Sprintf("%d B", n)
}

// FormatSpec renders n exactly in the short suffix form ParseSize reads ("8M", "4097"):
// for sizes written back into a spec string or a flag value.
func FormatSpec(n int64) string {
	if v, u, ok := exact(n); ok {
		return fmt.Sprintf("%d%s", v, u)
	}
	return fmt.Sprintf("%d", n)
}

// FormatHuman renders n for people to read: in the largest binary unit below it, with at
// most two decimals and no trailing zeros ("1 TiB", "1000 TiB", "1.5 GiB", "19.83 GiB").
func FormatHuman(n int64) string {
	num, unit, _ := strings.Cut(FormatSizePrec(n, 2), " ")
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + " " + unit
}
