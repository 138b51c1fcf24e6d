package flagsets

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// ReadInput reads FILE (or stdin for none or "-"), at most max bytes (the payload a slot
// holds): it reads no more than max+1 bytes, so a runaway stdin is refused as soon as it
// is too large and never fills memory (put, remote put). A cancelled ctx (Ctrl-C) stops it
// at once, even while the open or a read blocks (a FIFO no one writes, a terminal): the
// error wraps ctx.Err() and nothing was returned to store.
func ReadInput(ctx context.Context, stdin io.Reader, args []string, max int64) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readInput(stdin, args, max)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		// The reader goroutine stays blocked in open(2) or read(2); the command ends.
		return nil, fmt.Errorf("reading input: %w", ctx.Err())
	}
}

func readInput(stdin io.Reader, args []string, max int64) ([]byte, error) {
	r, name := stdin, "stdin"
	if len(args) > 0 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, args[0]
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading input: %w", err)
	case int64(len(data)) > max:
		return nil, fmt.Errorf("input (%s) is larger than %s, the most a slot holds; stopped reading after %d bytes", name, cachereport.Bytes(max), max+1)
	case len(data) == 0:
		return nil, fmt.Errorf("input is empty; nothing to store")
	}
	return data, nil
}

// ReadPayload reads put's input (args: FILE, "-" or none for stdin) before the cache on
// path is opened for writing, so that a slow or open-ended stdin keeps no one else off the
// device: the slot size comes from a read-only open that reads the metadata containers
// (cache.Detect) and closes again, and the input is read no further than one byte past a
// slot's payload. Errors are the open's, as the writer's open would give them.
func (f *Device) ReadPayload(ctx context.Context, path string, stdin io.Reader, args []string) ([]byte, error) {
	o, err := f.OpenOptions(nil, true)
	if err != nil {
		return nil, err
	}
	dev, err := devices.Open(path, o.Device)
	if err != nil {
		return nil, err
	}
	d, err := cache.Detect(dev, o)
	dev.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ReadInput(ctx, stdin, args, d.Config.SlotBytes-int64(d.Config.HeaderBytes))
}

// FitsSlot refuses data larger than a slot of cfg holds (the layout ReadPayload read may
// have changed before the writer's open).
func FitsSlot(data []byte, cfg engine.Config) error {
	if max := cfg.SlotBytes - int64(cfg.HeaderBytes); int64(len(data)) > max {
		return fmt.Errorf("input is larger than %s, the most a slot holds", cachereport.Bytes(max))
	}
	return nil
}
