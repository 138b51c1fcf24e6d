// Package reports holds the results of rbctl bench and rbctl simulate (one versioned schema
// for both) and renders them as tables, JSON, CSV and Markdown. Plots are in reports/plots.
package reports

import (
	"time"

	"github.com/rbctl/rbctl/workloads"
)

// Schema identifies the JSON document. Bump SchemaVersion on any incompatible change (a
// removed or renamed field, a changed unit); adding a field is compatible.
const (
	Schema        = "rbctl.report"
	SchemaVersion = 1
)

// Report is one comparison: the same workload run once per placement policy (and, in a
// sweep, once per parameter value).
type Report struct {
	Schema        string    `json:"schema"`
	SchemaVersion int       `json:"schema_version"`
	Command       string    `json:"command"` // "bench" or "simulate"
	Created       time.Time `json:"created"`
	Device        Device    `json:"device"`
	Workload      Workload  `json:"workload"`
	Window        Window    `json:"window"`
	Sweep         string    `json:"sweep,omitempty"` // swept parameter name ("util", "op", ...)
	// Trace describes a request trace workload (mooncake:FILE) as read: requests, block
	// references, the ceiling hit ratio of a cache that never evicts (trace.go).
	Trace *workloads.TraceStats `json:"trace,omitempty"`
	Runs  []Run                 `json:"runs"`
	// Explain is WAF by cause for each run (simulate --explain; explain.go).
	Explain []Explanation `json:"explain,omitempty"`
	// Drive and DriveLife: the endurance rating given (--drive) and each run's projected
	// drive life against it (drive.go).
	Drive     *Drive      `json:"drive,omitempty"`
	DriveLife []DriveLife `json:"drive_life,omitempty"`
	Notes     []string    `json:"notes,omitempty"`
	// Interrupted: the command was stopped (SIGINT/SIGTERM) before it finished; Partial says
	// what the runs cover.
	Interrupted bool   `json:"interrupted"`
	Partial     string `json:"partial,omitempty"`

	// Host is the machine a bench ran on (nil for simulate, which measures no time): its
	// figures are read with the machine's load, which each run records (Run.LoadStart).
	Host *Host `json:"host,omitempty"`

	// PerHandle asks Table and Markdown for the per-handle WAF table too (JSON always has it).
	PerHandle bool `json:"-"`
}

// Host describes the machine of a bench.
type Host struct {
	CPUs       int    `json:"cpus"`             // runtime.NumCPU
	GOMAXPROCS int    `json:"gomaxprocs"`       // the Go scheduler's processors during the runs
	Kernel     string `json:"kernel,omitempty"` // uname's release; empty when it could not be read
}

// Device describes what the runs wrote to (or, for simulate, what was modelled).
type Device struct {
	Path         string  `json:"path,omitempty"`
	Kind         string  `json:"kind"` // blockdev.Kind or "model"
	SizeBytes    int64   `json:"size_bytes"`
	FDP          bool    `json:"fdp"`     // device WAF comes from its FDP statistics log
	Handles      int     `json:"handles"` // placement handles
	RUBytes      int64   `json:"ru_bytes"`
	OP           float64 `json:"op"` // spare factor of the (shadow) FTL model
	MappingUnit  int64   `json:"mapping_unit"`
	Isolation    string  `json:"isolation"`
	GC           string  `json:"gc"`
	Precondition string  `json:"precondition"`
	Deallocate   bool    `json:"deallocate"` // freed slots are deallocated
}

// Workload describes the generator and driver settings.
type Workload struct {
	Name       string   `json:"name"` // kv, sequential, uniform, zipf, trace:<path>
	Seed       uint64   `json:"seed"`
	Tenants    []string `json:"tenants,omitempty"`
	ChunkBytes int      `json:"chunk_bytes"`
	SlotBytes  int64    `json:"slot_bytes"`
	Slots      int64    `json:"slots"`
	TargetUtil float64  `json:"target_util"`
	Eviction   string   `json:"eviction"`
	// RegionSlots: chunks per region under region eviction (a reclaim unit over a slot).
	RegionSlots float64 `json:"region_slots,omitempty"`
	Workers     int     `json:"workers"`
	Rate        float64 `json:"rate,omitempty"` // requests/s; 0 = closed loop
	Description string  `json:"description,omitempty"`
}

// Window states what the figures cover (SPEC: WAF after a warm-up).
type Window struct {
	WarmupBytes   *int64 `json:"warmup_bytes"`   // payload bytes stored before measuring; null when not measured
	MeasuredBytes int64  `json:"measured_bytes"` // payload bytes stored while measuring (first run)
	Description   string `json:"description"`
}

// Latency summarises one operation's latency histogram, in microseconds.
type Latency struct {
	Op     string  `json:"op"`
	Count  int64   `json:"count"`
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

// Where a WAF figure came from (WAF.Source).
const (
	// SourceModelled: the host-side estimate, an FTL model fed with the writes and
	// deallocates the engine (or the simulated engine) issued.
	SourceModelled = "modelled"
	// SourceFDPStats: ΔMBMW/ΔHBMW of a real device's FDP statistics log — a measurement.
	SourceFDPStats = "fdp-stats"
	// SourceEmulatorModel: the emulated SSD's FDP statistics log, which the emulator's own
	// FTL model produces. It is the same model as the host estimate fed the same writes, so
	// the two agree by construction; it confirms nothing about a drive.
	SourceEmulatorModel = "emulator-model"
)

// WAF is a write-amplification figure and where it came from.
type WAF struct {
	Value      float64 `json:"value"`            // over the measured window
	Steady     float64 `json:"steady,omitempty"` // second half of the measured window
	Source     string  `json:"source"`           // SourceModelled, SourceFDPStats or SourceEmulatorModel
	HostBytes  uint64  `json:"host_bytes"`
	MediaBytes uint64  `json:"media_bytes"`
	// Modelled only: GC relocations, and the part of them out of reclaim units that held
	// more than one handle's data (ftl.Stats.MixedRelocatedBytes).
	RelocatedBytes      uint64 `json:"relocated_bytes,omitempty"`
	MixedRelocatedBytes uint64 `json:"mixed_relocated_bytes,omitempty"`
	// Handles breaks a modelled WAF down by placement handle (handles that wrote nothing
	// in the window are left out).
	Handles []HandleWAF `json:"handles,omitempty"`
}

// HandleWAF is one placement handle's share of a modelled WAF over the same window.
type HandleWAF struct {
	Handle         int     `json:"handle"`
	Label          string  `json:"label,omitempty"` // what the policy put there ("salt rag", "metadata"), when it can tell
	HostBytes      uint64  `json:"host_bytes"`      // written by the host through this handle
	MediaBytes     uint64  `json:"media_bytes"`     // host writes + GC relocations of its data
	RelocatedBytes uint64  `json:"relocated_bytes"` // GC relocations of its data
	HostShare      float64 `json:"host_share"`      // of the window's host bytes
	WAF            float64 `json:"waf"`             // media / host; 0 when the host wrote nothing
}

// Tenant is one cache_salt's share of a run.
type Tenant struct {
	Salt         string  `json:"salt"`
	Requests     int64   `json:"requests"`
	BytesWritten int64   `json:"bytes_written"`
	HitRatio     float64 `json:"hit_ratio"`
	Evicted      int64   `json:"evicted"`    // chunks the cache evicted of this tenant's (measured window)
	SlotsHeld    int64   `json:"slots_held"` // slots it held when the run ended
	// With tenant budgets (tenants.go): the tenant's own budget in slots, or, for a tenant
	// without one, the slots it shares with the others without one. Both absent without
	// budgets.
	BudgetSlots *int64 `json:"budget_slots,omitempty"`
	SharedSlots *int64 `json:"shared_slots,omitempty"`
}

// Point is one timeline sample. The wall-clock figures are bench's; simulate has no clock
// and leaves them null.
type Point struct {
	Seconds      *float64 `json:"seconds"`       // wall clock since start (bench)
	PayloadBytes int64    `json:"payload_bytes"` // payload bytes stored so far
	OpsPerSec    *float64 `json:"ops_per_sec"`   // over the interval ending here (bench)
	WriteGBps    *float64 `json:"write_gbps"`
	ReadGBps     *float64 `json:"read_gbps"`
	WAF          *float64 `json:"waf"` // host (modelled) WAF over the interval ending here; null without a model
	// Request traces (simulate): requests run so far and the chunk hit ratio over the
	// interval ending here.
	Requests *int64   `json:"requests,omitempty"`
	HitRatio *float64 `json:"hit_ratio,omitempty"`
	CumWAF   *float64 `json:"waf_cum"` // host (modelled) WAF from the first sample to here; null without a model
	// MeasuredWAF is the host (modelled) WAF from the end of the warm-up to here: the
	// tables' window, whose last point is the table's WAF; absent during the warm-up.
	MeasuredWAF *float64 `json:"waf_measured,omitempty"`
}

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Us       float64 `json:"us"`
	Fraction float64 `json:"fraction"`
}

// Run is one policy's result. Pointer figures are null in JSON (blank or "-" in tables)
// when the command does not measure them: simulate has no wall clock (rates) and no device
// (deallocated bytes).
type Run struct {
	Policy       string    `json:"policy"`
	Admission    string    `json:"admission,omitempty"` // admission policy (workloads.NewAdmission) of a trace or non-default run
	Param        float64   `json:"param,omitempty"`     // sweep value
	Ops          int64     `json:"ops"`
	Requests     int64     `json:"requests"`
	ElapsedSec   float64   `json:"elapsed_seconds"`
	OpsPerSec    *float64  `json:"ops_per_sec"`
	ReadBytes    int64     `json:"read_bytes"`
	WrittenBytes int64     `json:"written_bytes"`
	ReadGBps     *float64  `json:"read_gbps"`
	WriteGBps    *float64  `json:"write_gbps"`
	HitRatio     float64   `json:"hit_ratio"`
	Latency      []Latency `json:"latency"`
	HostWAF      *WAF      `json:"host_waf"` // modelled; nil when no model ran or it could not finish
	// HostBytes is the bytes written to the device over the measured window, measured at
	// the device (bench: payload, slot headers, checkpoints), with or without a model; nil
	// where nothing measures it (simulate: HostWAF's are the model's input).
	HostBytes *int64 `json:"host_bytes,omitempty"`
	// NoModel says why HostWAF is nil — the shadow FTL model was infeasible for the device
	// (and what would make it feasible) or ran out of room — when it is.
	NoModel          string    `json:"no_model,omitempty"`
	DeviceWAF        *WAF      `json:"device_waf,omitempty"` // FDP statistics delta; nil without FDP
	DeallocatedBytes *int64    `json:"deallocated_bytes"`
	Evicted          int64     `json:"evicted"`
	Expired          int64     `json:"expired"`
	StoreFailed      int64     `json:"store_failed"`
	Utilisation      *float64  `json:"utilisation"`          // valid bytes / logical bytes at the end (model); null without one
	ChunksHit        int64     `json:"chunks_hit,omitempty"` // chunks served from the cache (measured window)
	Infeasible       bool      `json:"infeasible,omitempty"`
	Tenants          []Tenant  `json:"tenants,omitempty"`
	Trace            *TraceRun `json:"trace,omitempty"` // request traces: tokens and blocks (trace.go)
	// Queue is the queue depth over time of a run with arrival times (bench: a trace or a
	// recording at --speed, or --rate); nil otherwise (queue.go).
	Queue       *workloads.QueueStats `json:"queue,omitempty"`
	Timeline    []Point               `json:"timeline,omitempty"`
	RequestCDF  []CDFPoint            `json:"request_cdf,omitempty"`
	Note        string                `json:"note,omitempty"`        // caveats (warm-up timed out, ...)
	Error       string                `json:"error,omitempty"`       // the run failed part-way; figures cover what ran
	Interrupted bool                  `json:"interrupted,omitempty"` // stopped by a signal; figures cover what ran
	// Devices has one row per device of the cache (bench; one row for one device) and
	// DevicesTotal their sum (devices.go).
	Devices      []DeviceRun `json:"devices,omitempty"`
	DevicesTotal *DeviceRun  `json:"devices_total,omitempty"`
	// LoadStart and LoadEnd are the machine's load average (1, 5 and 15 minutes, as
	// /proc/loadavg gives them) when the run began and ended (bench; empty when not read).
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
}

// Failed reports whether the run ended in an error; tables leave it out and print the error
// under them.
func (r *Run) Failed() bool { return r.Error != "" }

// F64 and I64 return pointers for the optional figures.
func F64(v float64) *float64 { return &v }
func I64(v int64) *int64     { return &v }

// New starts a report for command.
func New(command string) *Report {
	return &Report{Schema: Schema, SchemaVersion: SchemaVersion, Command: command, Created: time.Now().UTC()}
}
