package flagsets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

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

// Write writes data to the file (created with mode 0600, or truncated), or to stdout when
// no file is given; ctx ending abandons it (Abandonable: a FIFO or pipe nobody reads).
// An error is the file's, never "not found" (exit 3 is a missing key or device).
func (o *Out) Write(ctx context.Context, stdout io.Writer, data []byte) error {
	return Abandonable(ctx, func() error {
		if !o.File() {
			_, err := stdout.Write(data)
			return err
		}
		if err := os.WriteFile(o.Path, data, 0o600); err != nil {
			return fmt.Errorf("--out: %v", err)
		}
		return nil
	})
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

// Stdout is a command's standard output as every command writes it (Execute sets it on the
// root command): it keeps the first write error, so that output that could not be written
// (a full disk, a closed descriptor) fails the command even where the writer's error is
// lost on the way (a table, cobra's help). Safe for concurrent use.
type Stdout struct {
	W   *os.File
	err atomic.Pointer[error]
}

// Write writes p to the file; after a failed write every later one fails the same way.
func (s *Stdout) Write(p []byte) (int, error) {
	if e := s.err.Load(); e != nil {
		return 0, *e
	}
	n, err := s.W.Write(p)
	if err != nil {
		s.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// Err is the first write error (nil: everything was written).
func (s *Stdout) Err() error {
	if e := s.err.Load(); e != nil {
		return *e
	}
	return nil
}

// Fd is the file's descriptor (is it a terminal?).
func (s *Stdout) Fd() uintptr { return s.W.Fd() }

// ErrInterrupted marks a command stopped by SIGINT/SIGTERM (the cli's exit status 130).
var ErrInterrupted = errors.New("interrupted")

// Abandonable runs write, and returns early with ErrInterrupted when ctx ends first: opening
// a FIFO nobody reads, or writing to a pipe nobody drains, blocks in the kernel where no
// signal reaches it. The abandoned write ends with the process.
func Abandonable(ctx context.Context, write func() error) error {
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the output was not written", ErrInterrupted)
	}
}
