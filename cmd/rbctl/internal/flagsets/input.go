package flagsets

import (
	"context"
	"fmt"
	"io"
	"os"

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
