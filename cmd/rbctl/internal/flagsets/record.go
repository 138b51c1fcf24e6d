package flagsets

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// Record is serve's --record, --record-redact, --record-max-bytes and --record-files: a
// JSON-lines recording of every chunk operation the node answers (docs/record.md).
type Record struct {
	Path     string
	Redact   bool
	MaxBytes int64
	MaxFiles int
}

// Add defines the flags.
func (f *Record) Add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.Path, "record", "", "record every chunk operation the node answers (RESP and gRPC get, set, exists, delete; peer fetches) to this file as JSON lines, without payload bytes (docs/record.md); replay it with --workload l2trace:FILE; empty: none")
	fs.BoolVar(&f.Redact, "record-redact", false, "with --record: write tenants (cache_salt), models and client addresses as keyed BLAKE2b hashes")
	flagcheck.SizeVar(fs, &f.MaxBytes, "record-max-bytes", "256M", "with --record: start a new file (FILE.1, FILE.2, ...) once one reaches this size")
	fs.IntVar(&f.MaxFiles, "record-files", 0, "with --record: keep at most this many files, deleting the oldest (0: all)")
}

// Check refuses the companion flags without --record and a path in a missing directory,
// before anything opens.
func (f *Record) Check(cmd *cobra.Command) error {
	if f.Path == "" {
		for _, n := range []string{"record-redact", "record-max-bytes", "record-files"} {
			if cmd.Flags().Changed(n) {
				return fmt.Errorf("--%s needs --record FILE", n)
			}
		}
		return nil
	}
	if f.MaxBytes < 4096 {
		return fmt.Errorf("--record-max-bytes %d: at least 4096", f.MaxBytes)
	}
	if f.MaxFiles < 0 {
		return fmt.Errorf("--record-files %d: must not be negative", f.MaxFiles)
	}
	if st, err := os.Stat(filepath.Dir(f.Path)); err != nil || !st.IsDir() {
		return fmt.Errorf("--record %s: its directory does not exist", f.Path)
	}
	return nil
}

// Start opens the recorder for a node over c (nil without --record) and sets it in opts;
// the header records the cache's slots and slot size and the node's eviction and admission.
func (f *Record) Start(c *sharded.Cache, nf *Node, opts *node.Options, version string) (*l2trace.Recorder, error) {
	if f.Path == "" {
		return nil, nil
	}
	u := c.Usage()
	h := l2trace.Header{Node: opts.Name, Capacity: l2trace.Capacity{Slots: u.SlotsTotal, SlotBytes: c.Shard(0).Layout().SlotBytes},
		Eviction: nf.Eviction, Admission: nf.Admission, Software: "rbctl " + version}
	rec, err := l2trace.New(l2trace.Options{Path: f.Path, MaxBytes: f.MaxBytes, MaxFiles: f.MaxFiles, Redact: f.Redact}, h)
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	opts.Recorder = rec
	return rec, nil
}
