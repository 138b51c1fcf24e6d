package reports

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckFile makes sure a report can be saved at path before anything runs: path is not a
// directory, and its directory exists (or is created) and takes a new file.
func CheckFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory; a file name is needed")
	}
	return CheckDir(filepath.Dir(path))
}

// CheckDir makes sure figures can be written into dir: it exists (or is created) and
// takes a new file.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the directory: %w", unwrapPath(err))
	}
	f, err := os.CreateTemp(dir, ".rbctl-write-check-*")
	if err != nil {
		return fmt.Errorf("directory %s is not writable: %w", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// SaveJSON writes r as JSON to the file path.
func SaveJSON(path string, r *Report) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := JSON(fh, r); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
