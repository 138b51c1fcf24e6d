package units

import "testing"

func TestFormatHuman(t *testing.T) {
	for n, want := range map[int64]string{
		1 << 40: "1 TiB", 1000 << 40: "1000 TiB", 256 << 20: "256 MiB", 3<<29 + 0: "1.5 GiB",
		512: "512 B", 1<<30 + 4096: "1 GiB", 21293752320: "19.83 GiB", 10000 << 30: "9.77 TiB",
	} {
		if got := FormatHuman(n); got != want {
			t.Errorf("FormatHuman(%d) = %q, want %q", n, got, want)
		}
	}
}
