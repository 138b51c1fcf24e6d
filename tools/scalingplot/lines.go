package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The lines scripts/vmtest/guest.d/80-scaling.sh prints, one run at a time:
//
//	scaling: env where=vm accel=tcg cores=2 kernel=6.1.0-57-amd64 mem_mib=1983 ...
//	scaling: kind=nullb devices=2 workers=8 put_mib_s=.. get_mib_s=.. ops_s=.. ...
//
// Everything else in the input (a whole QEMU console log) is ignored.
const (
	prefix = "scaling: "
	// maxLine bounds one line: a console log is untrusted input and the scanner's buffer
	// must not grow with it.
	maxLine = 4096
	// maxDevices bounds a point's device count (the curve is 1, 2, 4).
	maxDevices = 1024
)

// Run is one execution of the hook: where it ran and the points it measured.
type Run struct {
	Where         string  `json:"where"` // vm or host
	Accel         string  `json:"accel"` // tcg or kvm (vm), host (on the host itself)
	Cores         int     `json:"cores"`
	Kernel        string  `json:"kernel"`
	MemMiB        int     `json:"mem_mib"`
	Hypervisor    string  `json:"hypervisor"` // what the kernel logged ("none" if nothing)
	Load1         float64 `json:"load1_before"`
	MeasuredAt    string  `json:"measured_at"`
	Duration      string  `json:"duration"`
	DevMiB        int     `json:"dev_mib"`
	ValueKiB      int     `json:"value_kib"`
	WorkersPerDev int     `json:"workers_per_dev"`
	Source        string  `json:"source"`
	Points        []Point `json:"points"`
}

// Point is one bench over Devices devices of one kind; every figure is measured.
type Point struct {
	Kind       string  `json:"kind"`
	Devices    int     `json:"devices"`
	Workers    int     `json:"workers"`
	PutMiBs    float64 `json:"put_mib_s"`
	GetMiBs    float64 `json:"get_mib_s"`
	OpsS       float64 `json:"ops_s"`
	HitRatio   float64 `json:"hit_ratio"`
	BusyCores  float64 `json:"busy_cores"`    // every core's busy time over the window (/proc/stat)
	ProcCores  float64 `json:"proc_cores"`    // rbctl's own threads (/proc/PID/stat)
	CPUSPerGiB float64 `json:"cpu_s_per_gib"` // busy CPU seconds per GiB moved (put + get)
	WindowS    float64 `json:"window_s"`      // the sampled CPU window
	BusyBefore float64 `json:"busy_before"`   // busy cores in the second before the bench (other work)
}

// field says where a key=value goes; str, num or int is set.
type field struct {
	str *string
	num *float64
	int *int
}

func (r *Run) fields() map[string]field {
	return map[string]field{
		"where": {str: &r.Where}, "accel": {str: &r.Accel}, "cores": {int: &r.Cores},
		"kernel": {str: &r.Kernel}, "mem_mib": {int: &r.MemMiB}, "hypervisor": {str: &r.Hypervisor},
		"load1": {num: &r.Load1}, "date": {str: &r.MeasuredAt}, "duration": {str: &r.Duration},
		"dev_mib": {int: &r.DevMiB}, "value_kib": {int: &r.ValueKiB}, "workers_per_dev": {int: &r.WorkersPerDev},
	}
}

func (p *Point) fields() map[string]field {
	return map[string]field{
		"kind": {str: &p.Kind}, "devices": {int: &p.Devices}, "workers": {int: &p.Workers},
		"put_mib_s": {num: &p.PutMiBs}, "get_mib_s": {num: &p.GetMiBs}, "ops_s": {num: &p.OpsS},
		"hit_ratio": {num: &p.HitRatio}, "busy_cores": {num: &p.BusyCores}, "proc_cores": {num: &p.ProcCores},
		"cpu_s_per_gib": {num: &p.CPUSPerGiB}, "window_s": {num: &p.WindowS}, "busy_before": {num: &p.BusyBefore},
	}
}

// Every key is required: a line the hook did not write whole is refused, not half-read.
func fill(words []string, fs map[string]field) error {
	seen := map[string]bool{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("%q is not key=value", w)
		}
		f, known := fs[k]
		if !known {
			return fmt.Errorf("unknown key %q", k)
		}
		if seen[k] {
			return fmt.Errorf("key %q given twice", k)
		}
		seen[k] = true
		switch {
		case f.str != nil:
			if !token(v) {
				return fmt.Errorf("%s=%q: not a plain word", k, v)
			}
			*f.str = v
		case f.int != nil:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%s=%q: not a count", k, v)
			}
			*f.int = n
		default:
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return fmt.Errorf("%s=%q: not a finite non-negative number", k, v)
			}
			*f.num = x
		}
	}
	for k := range fs {
		if !seen[k] {
			return fmt.Errorf("key %q missing", k)
		}
	}
	return nil
}

// token: the characters the hook's values use (versions, dates, device kinds).
func token(s string) bool {
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:+-", c)
		if !ok {
			return false
		}
	}
	return len(s) <= 128
}

// Parse reads every "scaling:" line of r (other lines are skipped) into runs, one per env
// line, in order. A malformed scaling line, a point before any env line, a point whose
// device count is out of range, or the same kind and count twice in one run is an error
// naming the line.
func Parse(r io.Reader, source string) ([]Run, error) {
	br := bufio.NewReaderSize(r, maxLine)
	var runs []Run
	n := 0
	for {
		raw, long, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", source, n+1, err)
		}
		n++
		if long {
			// Console logs hold long lines of other programs; a long scaling line is not ours.
			if strings.HasPrefix(raw, prefix) {
				return nil, fmt.Errorf("%s:%d: a scaling line over %d bytes", source, n, maxLine)
			}
			continue
		}
		line := strings.TrimRight(raw, "\r")
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		words := strings.Fields(line[len(prefix):])
		if len(words) > 0 && words[0] == "env" {
			run := Run{Source: source}
			if err := fill(words[1:], run.fields()); err != nil {
				return nil, fmt.Errorf("%s:%d: env line: %w", source, n, err)
			}
			if run.Where != "vm" && run.Where != "host" {
				return nil, fmt.Errorf("%s:%d: where=%s: want vm or host", source, n, run.Where)
			}
			if run.Cores == 0 {
				return nil, fmt.Errorf("%s:%d: cores=0", source, n)
			}
			runs = append(runs, run)
			continue
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("%s:%d: a point before any env line", source, n)
		}
		var p Point
		if err := fill(words, p.fields()); err != nil {
			return nil, fmt.Errorf("%s:%d: point: %w", source, n, err)
		}
		if p.Devices < 1 || p.Devices > maxDevices {
			return nil, fmt.Errorf("%s:%d: devices=%d: want 1 to %d", source, n, p.Devices, maxDevices)
		}
		cur := &runs[len(runs)-1]
		for _, q := range cur.Points {
			if q.Kind == p.Kind && q.Devices == p.Devices {
				return nil, fmt.Errorf("%s:%d: %s with %d devices measured twice in one run", source, n, p.Kind, p.Devices)
			}
		}
		cur.Points = append(cur.Points, p)
	}
	return runs, nil
}

// readLine returns the next line without its newline, at most maxLine bytes of it (long
// says the rest was dropped), or io.EOF after the last.
func readLine(br *bufio.Reader) (string, bool, error) {
	b, more, err := br.ReadLine()
	if err != nil {
		return "", false, err
	}
	line := string(b)
	long := more
	for more {
		if _, more, err = br.ReadLine(); err != nil {
			break // the long line ends the input
		}
	}
	return line, long, nil
}
