package devices

import (
	"strings"
	"testing"
)

// fdp-status on an emulated SSD another process wrote: the statistics count those writes,
// this process's per-handle counters are zero; the screen says why instead of a table of
// zeros that contradicts the statistics.
func TestEmuSectionWithoutThisProcessWrites(t *testing.T) {
	m := &EmuModel{Spec: "emu:x", Handles: []EmuHandle{{Isolation: "initially-isolated"}, {Isolation: "initially-isolated"}}}
	sec := m.section()
	if sec.Header != nil || len(sec.Rows) != 0 || !strings.Contains(strings.Join(sec.Lines, "\n"), "nothing written by this process") {
		t.Fatalf("idle: %+v", sec)
	}
	m.Handles[1].HostBytes, m.Handles[1].MediaBytes = 4096, 8192
	sec = m.section()
	if len(sec.Rows) != 2 || sec.Rows[1][5] != "2.000" {
		t.Fatalf("written: %+v", sec)
	}
}
