package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports/plots"
)

const envLine = "scaling: env where=vm accel=tcg cores=2 kernel=6.1.0-57-amd64 mem_mib=1983 hypervisor=none load1=0.00 date=2026-12-01T16:00:00Z duration=3s dev_mib=128 value_kib=256 workers_per_dev=4"

func pointLine(kind string, devs int, put, busy string) string {
	return "scaling: kind=" + kind + " devices=" + itoa(devs) + " workers=" + itoa(4*devs) + " put_mib_s=" + put +
		" get_mib_s=50.5 ops_s=400.0 hit_ratio=0.970 busy_cores=" + busy + " proc_cores=0.80 cpu_s_per_gib=1.500 window_s=2.80 busy_before=0.05"
}

func itoa(n int) string { return strconv.Itoa(n) }

// A console log: kernel and harness lines around the hook's, a CR line ending, the hook's
// own "scaling hook:" notes, and a line longer than the reader's buffer.
func consoleLog() string {
	return strings.Join([]string{
		"[    1.234] nvme nvme0: 2/0/0 default/read/poll queues",
		"=== VMTEST STEP hook 80-scaling.sh",
		envLine + "\r",
		"scaling hook: nullb devices, 128 MiB each: /dev/nullb1 /dev/nullb2",
		pointLine("nullb", 1, "100.0", "1.10"),
		strings.Repeat("x", 3*maxLine),
		pointLine("nullb", 2, "180.0", "1.85"),
		pointLine("nullb", 4, "190.0", "1.98"),
		pointLine("loop", 1, "80.0", "1.20"),
		"VMTEST PASS hook 80-scaling.sh (40.00 s)",
	}, "\n") + "\n"
}

func TestParseConsoleLog(t *testing.T) {
	runs, err := Parse(strings.NewReader(consoleLog()), "console.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	r := runs[0]
	if r.Where != "vm" || r.Accel != "tcg" || r.Cores != 2 || r.Kernel != "6.1.0-57-amd64" || r.MeasuredAt != "2026-12-01T16:00:00Z" {
		t.Fatalf("env %+v", r)
	}
	if len(r.Points) != 4 {
		t.Fatalf("%d points, want 4: %+v", len(r.Points), r.Points)
	}
	p := r.Points[1]
	if p.Kind != "nullb" || p.Devices != 2 || p.Workers != 8 || p.PutMiBs != 180 || p.GetMiBs != 50.5 || p.BusyCores != 1.85 || p.CPUSPerGiB != 1.5 || p.BusyBefore != 0.05 {
		t.Fatalf("point %+v", p)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	good := pointLine("nullb", 1, "100.0", "1.10")
	cases := map[string]string{
		"point before env":  good,
		"missing key":       envLine + "\n" + strings.Replace(good, " ops_s=400.0", "", 1),
		"unknown key":       envLine + "\n" + good + " colour=red",
		"duplicate key":     envLine + "\n" + good + " put_mib_s=1",
		"not a number":      envLine + "\n" + strings.Replace(good, "put_mib_s=100.0", "put_mib_s=fast", 1),
		"NaN":               envLine + "\n" + strings.Replace(good, "put_mib_s=100.0", "put_mib_s=NaN", 1),
		"negative":          envLine + "\n" + strings.Replace(good, "busy_cores=1.10", "busy_cores=-1", 1),
		"zero devices":      envLine + "\n" + strings.Replace(good, "devices=1", "devices=0", 1),
		"no equals":         envLine + "\n" + good + " junk",
		"same point twice":  envLine + "\n" + good + "\n" + good,
		"bad where":         strings.Replace(envLine, "where=vm", "where=moon", 1),
		"odd characters":    strings.Replace(envLine, "kernel=6.1.0-57-amd64", "kernel=$(reboot)", 1),
		"env without cores": strings.Replace(envLine, "cores=2", "cores=0", 1),
		"long scaling line": envLine + "\n" + good + strings.Repeat(" x=1", maxLine),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if runs, err := Parse(strings.NewReader(in+"\n"), "in"); err == nil {
				t.Fatalf("accepted: %+v", runs)
			}
		})
	}
}

func TestMergeAndSaturation(t *testing.T) {
	runs, err := Parse(strings.NewReader(consoleLog()), "console.log")
	if err != nil {
		t.Fatal(err)
	}
	prevVM := Run{Where: "vm", Cores: 2, Points: []Point{{Kind: "nullb", Devices: 1}}}
	host := Run{Where: "host", Accel: "host", Cores: 2, Points: []Point{{Kind: "loop", Devices: 2, BusyCores: 0.5}, {Kind: "loop", Devices: 1, BusyCores: 0.2}}}
	got := Merge(runs, []Run{prevVM, host})
	if len(got) != 2 || got[0].Where != "host" || got[1].Where != "vm" || len(got[1].Points) != 4 {
		t.Fatalf("merge: %+v", got)
	}
	if got[0].Points[0].Devices != 1 {
		t.Fatalf("host points not sorted by devices: %+v", got[0].Points)
	}
	sat := Saturation(got)
	// nullb reaches 0.9 × 2 cores at 2 devices (1.85); loop (1.20 at 1) and the host never do.
	if len(sat) != 1 || sat[0].Where != "vm" || sat[0].Kind != "nullb" || sat[0].Devices != 2 {
		t.Fatalf("saturation %+v", sat)
	}
}

func TestRunWritesDocAndPlot(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "console.log")
	if err := os.WriteFile(in, []byte(consoleLog()), 0o644); err != nil {
		t.Fatal(err)
	}
	hostIn := filepath.Join(dir, "host.txt")
	host := strings.Replace(envLine, "where=vm accel=tcg", "where=host accel=host", 1) + "\n" +
		pointLine("loop", 1, "900.0", "1.00") + "\n" + pointLine("loop", 2, "1500.0", "1.90") + "\n"
	if err := os.WriteFile(hostIn, []byte(host), 0o644); err != nil {
		t.Fatal(err)
	}
	js, png := filepath.Join(dir, "scaling.json"), filepath.Join(dir, "scaling.png")
	if err := run(js, png, []string{hostIn, in}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10000 {
		t.Fatalf("%s: %d bytes, not a plot PNG", png, len(b))
	}
	// A second run with only the host's lines keeps the VM run from the JSON it wrote.
	if err := run(js, png, []string{hostIn}); err != nil {
		t.Fatal(err)
	}
	runs, err := ReadDoc(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].Where != "vm" || len(runs[1].Points) != 4 {
		t.Fatalf("the VM run was not kept: %+v", runs)
	}
	if err := run(filepath.Join(dir, "none.json"), png, nil); err == nil {
		t.Fatal("no inputs and no previous document: want an error")
	}
}

func TestWriteTable(t *testing.T) {
	runs, err := Parse(strings.NewReader(consoleLog()), "console.log")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, runs); err != nil {
		t.Fatal(err)
	}
	// nullb at 2 devices: (180 + 50.5) / (100 + 50.5) = 1.53 × the 1-device total.
	if !strings.Contains(b.String(), "| vm (tcg) | nullb | 2 | 8 | 180 | 50 | 230 | 1.53 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(consoleLog()))
	f.Add([]byte(envLine + "\nscaling: kind=a devices=1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		runs, err := Parse(bytes.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		for _, r := range runs {
			for _, p := range r.Points {
				if p.Devices < 1 || p.Devices > maxDevices || p.PutMiBs < 0 || p.Kind == "" {
					t.Fatalf("accepted a bad point %+v", p)
				}
			}
		}
	})
}

// Both panels: the device counts as x labels, distinct y labels from 0, and the legend
// (beside the data) naming the saturated point and the reference lines.
func TestPanels(t *testing.T) {
	runs, err := Parse(strings.NewReader(consoleLog()), "console.log")
	if err != nil {
		t.Fatal(err)
	}
	p, err := panel(runs[0], Saturation(runs))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpuPanel(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*plots.Figure{"throughput": p, "cpu": c} {
		x, y := f.AxisTicks()
		var xs, ys []string
		for _, tk := range x {
			xs = append(xs, tk.Label)
		}
		seen := map[string]bool{}
		for _, tk := range y {
			if tk.Label == "" {
				continue
			}
			if seen[tk.Label] {
				t.Errorf("%s: y label %q twice", name, tk.Label)
			}
			seen[tk.Label] = true
			ys = append(ys, tk.Label)
		}
		if strings.Join(xs, " ") != "1 2 4" || len(ys) < 3 || !strings.HasPrefix(ys[0], "0") {
			t.Errorf("%s: x labels %q, y labels %q", name, xs, ys)
		}
	}
	if got := strings.Join(p.Legend(), "|"); !strings.Contains(got, "|cores saturated:|  nullb at 2 devices (1.85 of 2 busy)") {
		t.Errorf("throughput legend %q", got)
	}
	if got := strings.Join(c.Legend(), "|"); !strings.HasSuffix(got, "|2 cores|saturation threshold (80%)") {
		t.Errorf("cpu legend %q", got)
	}
}
