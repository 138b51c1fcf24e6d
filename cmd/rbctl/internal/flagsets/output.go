package flagsets

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/devices/safety"
)

// Out is -o/--out: the file a payload is written to instead of stdout (get, remote get).
type Out struct{ Path string }

// Add defines -o/--out on cmd.
func (o *Out) Add(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVarP(&o.Path, "out", "o", "", usage)
}

// Check refuses, before anything runs, a destination whose contents would be lost
// (safety.Output): one of the command's inputs, a cache, a filesystem image, a device, a
// file in use.
// A file in a directory that does not exist is refused too, before the device is read, and
// not as "not found" (exit 3 is a missing key or device).
func (o *Out) Check(inputs ...string) error {
	if err := safety.Output("--out", o.Path, inputs); err != nil {
		return err
	}
	if o.File() {
		dir := filepath.Dir(o.Path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("--out %s: its directory %s does not exist", o.Path, dir)
		}
	}
	return nil
}

// File says whether the payload goes to a file rather than stdout.
func (o *Out) File() bool { return o.Path != "" && o.Path != "-" }

// Write writes data to the file (created with mode 0600, or truncated).
// An error is the file's, never "not found" (exit 3 is a missing key or device).
func (o *Out) Write(data []byte) error {
	if err := os.WriteFile(o.Path, data, 0o600); err != nil {
		return fmt.Errorf("--out: %v", err)
	}
	return nil
}

// checkPlotDir runs safety.Output on every figure-like file already in dir: a figure is
// written over a file of the same name.
func checkPlotDir(dir string, inputs []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // a new directory (CheckDir made it) or none: nothing to lose
	}
	for _, e := range ents {
		if ext := strings.ToLower(filepath.Ext(e.Name())); ext == ".png" || ext == ".svg" {
			if err := safety.Output("--plot", filepath.Join(dir, e.Name()), inputs); err != nil {
				return err
			}
		}
	}
	return nil
}
