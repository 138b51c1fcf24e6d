package reports

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{"plain/key@1": "plain/key@1", "a\nb": `a\nb`, "\x1b[0m": `\x1b[0m`, "a\\b": `a\\b`, "\xff": `\xff`} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
