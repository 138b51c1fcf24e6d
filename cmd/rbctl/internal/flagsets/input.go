package flagsets

import (
	"fmt"
	"io"
	"os"

	"github.com/rbctl/rbctl/reports/cachereport"
)

// ReadInput reads FILE (or stdin for none or "-"), at most max bytes: a slot is far
// smaller, and the cap keeps a runaway stdin from filling memory (put, remote put).
func ReadInput(stdin io.Reader, args []string, max int64) ([]byte, error) {
	r := stdin
	if len(args) > 0 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading input: %w", err)
	case int64(len(data)) > max:
		return nil, fmt.Errorf("input is larger than %s; no slot holds that much", cachereport.Bytes(max))
	case len(data) == 0:
		return nil, fmt.Errorf("input is empty; nothing to store")
	}
	return data, nil
}
