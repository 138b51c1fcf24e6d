package hints

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/workloads"
)

// Library errors name config fields; the CLI names the flag, and only a flag the command has.
func TestFlagHints(t *testing.T) {
	format := &cobra.Command{Use: "format"}
	format.Flags().String("meta-bytes", "", "")
	format.Flags().String("slot-bytes", "", "")
	format.Flags().String("create", "", "")
	get := &cobra.Command{Use: "get"}
	rec := &cobra.Command{Use: "recover"}
	rec.Flags().Bool("force", false, "")
	sim := &cobra.Command{Use: "simulate"}
	sim.Flags().Float64("op", 0, "")
	sim.Flags().String("region", "", "")
	for _, c := range []struct {
		cmd     *cobra.Command
		err     error
		want    string // "" = no hint
		notWant string
	}{
		{format, &engine.FieldError{Kind: engine.ErrDeviceTooSmall, Fields: []string{"meta_total_bytes"}, Detail: "metadata region (meta_total_bytes 1) too big"},
			"; meta_total_bytes is --meta-bytes", "slot-bytes"},
		{format, &engine.FieldError{Kind: engine.ErrConfig, Fields: []string{"slot_bytes"}, Detail: "SlotBytes (slot_bytes): 12345"}, "; slot_bytes is --slot-bytes", ""},
		{get, fmt.Errorf("shard 1: %w", &engine.FieldError{Kind: engine.ErrCheckpointTooBig, Fields: []string{"meta_total_bytes"}, Detail: "a larger meta_total_bytes"}), "; meta_total_bytes is rbctl format's --meta-bytes", ""},
		{get, &engine.FieldError{Kind: engine.ErrLayoutMismatch, Fields: []string{"namespace"}, Detail: "open it with namespace legacy"}, "", "--"}, // get has no --key-namespace
		{get, fmt.Errorf("%w on the device: container 0: x; container 1: y", engine.ErrNoCheckpoint), "; format it first (rbctl format)", ""},
		{format, fmt.Errorf("%w on the device", engine.ErrNoCheckpoint), "", "format it first"},
		{sim, fmt.Errorf("%w (%w): raise the over-provisioning", ftl.ErrConfig, ftl.ErrNoSpare), "; --op sets the over-provisioning", ""},
		{sim, fmt.Errorf("%w: raise the over-provisioning", ftl.ErrConfig), "", "--op"}, // typed, not read from the text
		{get, fmt.Errorf("%w (%w): raise the over-provisioning", ftl.ErrConfig, ftl.ErrNoSpare), "", "--op"},
		{sim, fmt.Errorf("bench: %w", workloads.CheckRegion(100, 10)), "; --region sets the region size", ""},
		{sim, fmt.Errorf("slot_bytes is wrong"), "", "--"},                                    // not an engine error: no field mapping
		{format, fmt.Errorf("%w: slot_bytes named in text only", engine.ErrConfig), "", "--"}, // the fields are typed, not read from the text
		{rec, fmt.Errorf("c.img: %w: in doubt", cache.ErrRefused), "c.img: nothing written: in doubt; pass --force to write it anyway (--dry-run lists what would be dropped)", ""},
		{get, fmt.Errorf("c.img: %w: in doubt", cache.ErrRefused), "", "--force"},
		{get, fmt.Errorf("c.img: %w", &cache.FallbackError{}), "; run rbctl recover: it takes back the keys whose slots still hold them and writes the repaired index (rbctl inspect shows both containers)", ""},
	} {
		got := Add(c.cmd, c.err).Error()
		if c.want == "" && got != c.err.Error() {
			t.Errorf("%s: %q gained a hint: %q", c.cmd.Name(), c.err, got)
		}
		if c.want != "" && !strings.HasSuffix(got, c.want) {
			t.Errorf("%s: %q, want it to end %q", c.cmd.Name(), got, c.want)
		}
		if c.notWant != "" && strings.Contains(strings.TrimPrefix(got, c.err.Error()), c.notWant) {
			t.Errorf("%s: hint of %q mentions %q", c.cmd.Name(), got, c.notWant)
		}
	}
}
