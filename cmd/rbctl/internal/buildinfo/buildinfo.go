// Package buildinfo says which rbctl is running: the version, commit and build date that
// make build stamps with -ldflags, completed from the VCS stamp Go embeds in module builds.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is what `rbctl version` prints; its JSON is `rbctl version --json`.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"` // 12 hex digits, "+dirty" when built from a modified tree
	Date    string `json:"build_date"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// Read returns the build information: version, commit and date as stamped ("" for not
// stamped: commit and date then come from Go's VCS stamp, else "unknown").
func Read(version, commit, date string) Info {
	b := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	dirty := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			case s.Key == "vcs.modified" && s.Value == "true" && commit == "":
				dirty = "+dirty"
			}
		}
	}
	b.Commit = b.Commit[:min(len(b.Commit), 12)]
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	b.Commit += dirty
	return b
}

// String is the one-line form: "rbctl VERSION (commit C, built D, go, os/arch)".
func (b Info) String() string {
	return fmt.Sprintf("rbctl %s (commit %s, built %s, %s, %s/%s)", b.Version, b.Commit, b.Date, b.Go, b.OS, b.Arch)
}
