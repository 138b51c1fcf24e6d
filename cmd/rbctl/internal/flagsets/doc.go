// Package flagsets holds the flag groups several rbctl commands share, each parsed into the
// options of the library it feeds: opening a device and its cache (Device, Cache), naming a
// key (Key), a placement policy (Placement), a workload (Workload), a report's output
// (ReportOut) and --create. A group's errors name its flags: it is the CLI side of the
// layout (cmd/rbctl/internal/cli wires the groups into commands and adds the hints).
package flagsets
