package cachereport

// What every report over several devices shares (format, inspect and recover of one cache
// sharded over DEV [DEV...]): the outcome error, which says which devices failed, and the
// table cells of a device that has no numbers.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/rbctl/rbctl/reports"
)

// DevicesError is the outcome of a command over several devices some of which failed: how
// many of how many, and each failure (its message names its device). It matches
// fs.ErrNotExist (exit code 3) only when every failure is a missing device; otherwise it
// unwraps to the other failures, so a refusal (safety.ErrHasData, ErrRefused) stays
// visible to errors.Is.
type DevicesError struct {
	Of   int     // devices given
	Errs []error // one per failed device
}

func (e *DevicesError) Error() string {
	if e.Of == 1 && len(e.Errs) == 1 {
		return e.Errs[0].Error()
	}
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%d of %s failed: %s", len(e.Errs), plural(e.Of, "device"), strings.Join(msgs, "; "))
}

// Unwrap is every failure that is not a missing device, or all of them when each is one.
func (e *DevicesError) Unwrap() []error {
	var other []error
	for _, err := range e.Errs {
		if !errors.Is(err, fs.ErrNotExist) {
			other = append(other, err)
		}
	}
	if len(other) == 0 {
		return e.Errs
	}
	return other
}

// DevicesErr is nil when errs holds no error, else a *DevicesError over the non-nil ones,
// each named by its device (paths[i]) unless its message already names it.
func DevicesErr(paths []string, errs []error) error {
	var failed []error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if len(paths) > 1 && !strings.Contains(err.Error(), paths[i]) {
			err = fmt.Errorf("%s: %w", paths[i], err)
		}
		failed = append(failed, err)
	}
	if len(failed) == 0 {
		return nil
	}
	return &DevicesError{Of: len(paths), Errs: failed}
}

// errText is a failure as one escaped table cell or JSON string ("" for none).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return reports.Escape(strings.Join(strings.Fields(err.Error()), " "))
}

// plural is "1 device", "2 devices".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
