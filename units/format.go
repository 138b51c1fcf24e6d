package units

import "fmt"

// FormatSize renders n bytes in binary units with one decimal ("1.5 MiB"); below 1 KiB in
// bytes ("512 B"). ParseSize reads the unit part back (to within the rounding).
func FormatSize(n int64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}
