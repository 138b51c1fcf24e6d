package devices

import "testing"

// Memory devices, and only they, are InMemory: mem:SIZE and an emu: spec without a path.
func TestInMemory(t *testing.T) {
	for p, want := range map[string]bool{
		"mem:64M": true, "emu:mem?size=64M&ru=1M": true, "emu:mem": true,
		"emu:/var/tmp/e.img?size=64M": false, "/dev/nvme0n1": false, "c.img": false, "emu:mem?bogus=1": false,
	} {
		if got := InMemory(p); got != want {
			t.Errorf("InMemory(%q) = %v, want %v", p, got, want)
		}
	}
}
