package reports

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// Drive is an endurance rating (--drive): total bytes written (tbw=, in decimal TB as
// vendors state it) or drive writes per day over a warranty (dwpd=…,years=…, with the
// capacity from the device or --device-size). The rating is taken as the flash writes the
// drive endures: a projection, since vendors rate at their own workload's WAF.
type Drive struct {
	Spec     string  `json:"spec"`
	TBW      float64 `json:"tbw,omitempty"` // TB (10^12 bytes)
	DWPD     float64 `json:"dwpd,omitempty"`
	Years    float64 `json:"years,omitempty"`
	Capacity int64   `json:"capacity_bytes,omitempty"` // for dwpd; set by WithCapacity unless the spec gives it
	// HostRate, bytes/s, supplies the host write rate a run has no clock for (simulate of a
	// synthetic workload without --rate): host-rate=SIZE in the spec.
	HostRate float64 `json:"host_rate,omitempty"`
	// ReqRate, requests/s: the host write rate is then the run's host bytes per request
	// times it (req-rate=N), so policies that write less per request last longer.
	ReqRate float64 `json:"req_rate,omitempty"`

	specCapacity bool // capacity= was given: a size sweep does not change it
}

// ErrDrive: a --drive spec that cannot be read.
var ErrDrive = errors.New("drive")

// ParseDrive reads "tbw=14000", "dwpd=1,years=5" (optionally capacity=SIZE), each with an
// optional host-rate=SIZE (bytes per second) or req-rate=N (requests per second). Unknown or repeated keys, values that are not
// positive finite numbers, and tbw together with dwpd are refused.
func ParseDrive(spec string) (*Drive, error) {
	d := &Drive{Spec: spec}
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("%w: empty spec; want tbw=TB or dwpd=N,years=N", ErrDrive)
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: %q is not key=value (keys: tbw, dwpd, years, capacity, host-rate, req-rate)", ErrDrive, item)
		}
		if seen[k] {
			return nil, fmt.Errorf("%w: %s given twice", ErrDrive, k)
		}
		seen[k] = true
		switch k {
		case "tbw", "dwpd", "years", "req-rate":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%w: %s=%s is not a positive number", ErrDrive, k, v)
			}
			switch k {
			case "tbw":
				d.TBW = f
			case "dwpd":
				d.DWPD = f
			case "req-rate":
				d.ReqRate = f
			default:
				d.Years = f
			}
		case "capacity", "host-rate":
			n, err := units.ParseSize(strings.TrimSuffix(v, "/s"))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%w: %s=%s is not a positive size (e.g. 3.84T, 2G)", ErrDrive, k, v)
			}
			if k == "capacity" {
				d.Capacity, d.specCapacity = n, true
			} else {
				d.HostRate = float64(n)
			}
		default:
			return nil, fmt.Errorf("%w: unknown key %q (keys: tbw, dwpd, years, capacity, host-rate, req-rate)", ErrDrive, k)
		}
	}
	switch {
	case d.HostRate > 0 && d.ReqRate > 0:
		return nil, fmt.Errorf("%w: host-rate= and req-rate= both set the write rate; give one", ErrDrive)
	case d.TBW > 0 && (d.DWPD > 0 || d.Years > 0 || d.Capacity > 0):
		return nil, fmt.Errorf("%w: tbw= is a rating on its own; it does not combine with dwpd=, years= or capacity=", ErrDrive)
	case d.TBW == 0 && d.DWPD == 0:
		return nil, fmt.Errorf("%w: give tbw=TB, or dwpd=N with years=N", ErrDrive)
	case d.DWPD > 0 && d.Years == 0:
		return nil, fmt.Errorf("%w: dwpd= needs years= (the warranty it is rated over)", ErrDrive)
	}
	return d, nil
}

// WithCapacity sets the capacity a dwpd rating is over, unless the spec gave one.
func (d *Drive) WithCapacity(bytes int64) {
	if d.Capacity == 0 {
		d.Capacity = bytes
	}
}

// EnduranceBytes is the rating in bytes of flash writes; 0 when a dwpd rating has no
// capacity yet.
func (d *Drive) EnduranceBytes() float64 {
	if d.TBW > 0 {
		return d.TBW * 1e12
	}
	return d.DWPD * float64(d.Capacity) * 365 * d.Years
}

// DriveLife is one run's projection against a Drive.
type DriveLife struct {
	Policy    string  `json:"policy"`
	Admission string  `json:"admission,omitempty"`
	Param     float64 `json:"param,omitempty"`
	WAF       float64 `json:"waf"`
	WAFSource string  `json:"waf_source"`
	// HostRate is the host write rate (bytes/s) the projection assumes; RateSource says
	// where it came from (measured, the trace's arrival times, --rate, or the spec).
	HostRate   *float64 `json:"host_rate"`
	RateSource string   `json:"rate_source,omitempty"`
	LifeDays   *float64 `json:"life_days"`       // endurance / (host rate × WAF); null without a rate
	HostBytes  float64  `json:"host_bytes_life"` // host bytes the drive takes at this WAF: endurance / WAF
	// Prefill tokens saved per TB of flash written (and its inverse, flash bytes per token
	// saved), over the measured window; null when the run saved no token.
	TokensPerTB   *float64 `json:"tokens_per_tb_flash"`
	FlashPerToken *float64 `json:"flash_bytes_per_token"`
}

// DriveNote labels every drive-life figure.
const DriveNote = "drive life is a projection: the endurance rating taken as flash writes, divided by the run's host write rate × its WAF; " +
	"the WAF is the model's or the device's as the WAF source says, and the rating is the vendor's at its own workload"

// Project is one run's projection: hostBytes and mediaBytes over a window of seconds (0:
// no clock; then d's HostRate if given), tokens saved over it (0: not known).
func (d *Drive) Project(policy string, hostBytes, mediaBytes uint64, source string, rate float64, rateSource string, tokens int64) (DriveLife, bool) {
	end := d.EnduranceBytes()
	if hostBytes == 0 || mediaBytes == 0 || end == 0 {
		return DriveLife{}, false
	}
	waf := float64(mediaBytes) / float64(hostBytes)
	l := DriveLife{Policy: policy, WAF: waf, WAFSource: source, HostBytes: end / waf}
	if d.HostRate > 0 {
		l.HostRate, l.RateSource = F64(d.HostRate), "--drive host-rate"
	} else if rate > 0 {
		l.HostRate, l.RateSource = F64(rate), rateSource
	}
	if l.HostRate != nil {
		l.LifeDays = F64(end / (*l.HostRate * waf) / 86400)
	}
	if tokens > 0 {
		per := float64(mediaBytes) / float64(tokens)
		l.FlashPerToken, l.TokensPerTB = F64(per), F64(1e12/per)
	}
	return l, true
}

// ApplyDrive projects every run's drive life; tokensSaved gives a run's prefill tokens
// saved over its measured window (0: unknown), rate its host write rate in bytes/s and
// where that came from (0: none).
func ApplyDrive(r *Report, d *Drive, tokensSaved func(Run) int64, rate func(Run) (float64, string)) {
	r.Drive = d
	for _, run := range r.Runs {
		w := run.DeviceWAF
		if w == nil || w.MediaBytes == 0 {
			w = run.HostWAF
		}
		if run.Failed() || w == nil {
			continue
		}
		v, src := rate(run)
		pd := d
		if r.Sweep == "size" && d.DWPD > 0 && !d.specCapacity { // each point is a device of its size
			c := *d
			c.Capacity = int64(run.Param)
			pd = &c
		}
		l, ok := pd.Project(run.Policy, w.HostBytes, w.MediaBytes, w.Source, v, src, tokensSaved(run))
		if !ok {
			continue
		}
		l.Admission, l.Param = run.Admission, run.Param
		r.DriveLife = append(r.DriveLife, l)
	}
}

// Line states one projection in a sentence (for reports without a table).
func (l DriveLife) Line(d *Drive) string {
	life := "no host write rate to project days from"
	if l.LifeDays != nil {
		life = fmt.Sprintf("%s days at %s/s (%s)", days(*l.LifeDays), units.FormatSize(int64(*l.HostRate)), l.RateSource)
	}
	tok := ""
	if l.TokensPerTB != nil {
		tok = fmt.Sprintf(", %.2f M prefill tokens saved per TB of flash (%.1f KiB of flash per token)", *l.TokensPerTB/1e6, *l.FlashPerToken/1024)
	}
	return fmt.Sprintf("drive life (projection, --drive %s): %s × WAF %.3f (%s); %.1f host TB to wear-out%s",
		d.Spec, life, l.WAF, l.WAFSource, l.HostBytes/1e12, tok)
}

func driveRows(r *Report) ([]string, [][]string) {
	h := []string{"policy"}
	if r.Sweep != "" {
		h = append(h, r.Sweep)
	}
	h = append(h, "admission", "WAF", "host write rate", "life days (projection)", "host TB to wear-out", "Mtok saved / TB flash", "flash KiB / tok")
	var rows [][]string
	for _, l := range r.DriveLife {
		row := []string{l.Policy}
		if r.Sweep != "" {
			row = append(row, sweepCell(r, l.Param))
		}
		rate := "-"
		if l.HostRate != nil {
			rate = units.FormatSize(int64(*l.HostRate)) + "/s (" + l.RateSource + ")"
		}
		row = append(row, orDash(l.Admission), f3(l.WAF)+" ("+l.WAFSource+")", rate, optF(l.LifeDays, days),
			f2(l.HostBytes/1e12), optF(l.TokensPerTB, func(v float64) string { return f2(v / 1e6) }), optF(l.FlashPerToken, func(v float64) string { return f2(v / 1024) }))
		rows = append(rows, row)
	}
	return h, rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func driveTitle(r *Report) string {
	d := r.Drive
	if r.Sweep == "size" && d.DWPD > 0 && !d.specCapacity {
		return fmt.Sprintf("drive life (projection) for --drive %s: endurance %g drive writes a day of each swept size for %g years", d.Spec, d.DWPD, d.Years)
	}
	return fmt.Sprintf("drive life (projection) for --drive %s: endurance %.0f TB of flash writes", d.Spec, d.EnduranceBytes()/1e12)
}

// driveTables writes the drive-life table, if any, and its note.
func driveTables(w io.Writer, r *Report, md bool) error {
	if r.Drive == nil || len(r.DriveLife) == 0 {
		return nil
	}
	h, rows := driveRows(r)
	if md {
		fmt.Fprintf(w, "\n%s\n\n| %s |\n|%s\n", driveTitle(r), strings.Join(h, " | "), strings.Repeat("---|", len(h)))
		for _, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
		_, err := fmt.Fprintf(w, "\n_%s_\n", DriveNote)
		return err
	}
	if err := WriteWrapped(w, driveTitle(r)); err != nil {
		return err
	}
	if err := renderTable(w, h, rows); err != nil {
		return err
	}
	if err := WriteWrapped(w, DriveNote); err != nil {
		return err
	}
	for _, l := range r.DriveLife {
		if l.LifeDays == nil {
			return WriteWrapped(w, noRateNote)
		}
	}
	return nil
}

const noRateNote = "life days: no host write rate (simulate has no clock for a synthetic workload): give req-rate=N (requests/s) or host-rate=SIZE (bytes/s) in --drive"

// ProjectDrive projects every run of r against d (ApplyDrive) with what the report itself
// tells: prefill tokens saved (a trace's, else chunks hit × chunkTokens; 0 tokens: not
// known) and the host write rate, from the first of: the measured window's wall clock
// (bench), the trace's arrival times (simulate of a request trace), the workload's request
// rate (--rate). The bytes are the WAF's host bytes over the measured window.
func (r *Report) ProjectDrive(d *Drive, chunkTokens int) {
	tokens := func(run Run) int64 {
		if run.Trace != nil {
			return run.Trace.TokensSaved
		}
		return run.ChunksHit * int64(chunkTokens)
	}
	rate := func(run Run) (float64, string) {
		w := run.HostWAF
		if w == nil {
			w = run.DeviceWAF
		}
		if w == nil || w.HostBytes == 0 {
			return 0, ""
		}
		host := float64(w.HostBytes)
		switch {
		case d.ReqRate > 0 && run.Requests > 0:
			return host / float64(run.Requests) * d.ReqRate, "--drive req-rate"
		case run.WriteGBps != nil && run.ElapsedSec > 0:
			return host / run.ElapsedSec, "measured"
		case r.Trace != nil && r.Trace.DurationMs > 0 && r.Trace.Requests > 0 && run.Requests > 0:
			loops := float64(run.Requests) / float64(r.Trace.Requests)
			return host / (loops * float64(r.Trace.DurationMs) / 1e3), "trace arrival times"
		case r.Workload.Rate > 0 && run.Requests > 0:
			return host / (float64(run.Requests) / r.Workload.Rate), "--rate"
		}
		return 0, ""
	}
	ApplyDrive(r, d, tokens, rate)
}

// days shows a life: whole days, or two decimals under ten.
func days(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
