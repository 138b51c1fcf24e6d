package units

import "testing"

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		256 << 20: "256.0 MiB", 1 << 40: "1.0 TiB", 1<<63 - 1: "8.0 EiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatExactAndSpec(t *testing.T) {
	for n, want := range map[int64][2]string{0: {"0 B", "0"}, 4097: {"4097 B", "4097"}, 1024: {"1 KiB", "1K"},
		3 << 19: {"1536 KiB", "1536K"}, 512 << 20: {"512 MiB", "512M"}, 2 << 40: {"2 TiB", "2T"}, 1 << 50: {"1024 TiB", "1024T"}} {
		if got := FormatExact(n); got != want[0] {
			t.Errorf("FormatExact(%d) = %q, want %q", n, got, want[0])
		}
		if got := FormatSpec(n); got != want[1] {
			t.Errorf("FormatSpec(%d) = %q, want %q", n, got, want[1])
		}
		if back, err := ParseSize(FormatSpec(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSpec(%d)) = %d, %v", n, back, err)
		}
	}
	if got := FormatSizePrec(1<<20, 2); got != "1.00 MiB" {
		t.Errorf("FormatSizePrec(1 MiB, 2) = %q", got)
	}
}
