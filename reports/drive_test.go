package reports

import (
	"errors"
	"math"
	"testing"
)

func TestParseDrive(t *testing.T) {
	good := []struct {
		spec string
		end  float64 // endurance bytes with a 1e12-byte capacity
	}{
		{"tbw=14000", 14000e12},
		{"dwpd=1,years=5", 1 * 1e12 * 365 * 5},
		{"dwpd=3, years=5, capacity=2T", 3 * float64(2<<40) * 365 * 5},
		{"tbw=7008,host-rate=2G", 7008e12},
	}
	for _, c := range good {
		d, err := ParseDrive(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		d.WithCapacity(1e12)
		if got := d.EnduranceBytes(); math.Abs(got/c.end-1) > 1e-12 {
			t.Errorf("%q: endurance %g, want %g", c.spec, got, c.end)
		}
	}
	for _, bad := range []string{"", "tbw", "tbw=", "tbw=0", "tbw=-3", "tbw=NaN", "tbw=Inf", "dwpd=1", "years=5", "tbw=1,tbw=2",
		"tbw=100,dwpd=1,years=5", "tbw=100,capacity=1T", "dwpd=1,years=5,capacity=0", "dwpd=1,years=5,host-rate=x", "pbw=3", "tbw=1,req-rate=0", "tbw=1,req-rate=2,host-rate=1G", "dwpd=1;years=5"} {
		if _, err := ParseDrive(bad); !errors.Is(err, ErrDrive) {
			t.Errorf("%q: err %v, want ErrDrive", bad, err)
		}
	}
}

// Life = endurance / (host rate × WAF); tokens per TB of flash = 1e12 / flash bytes per
// token; a rate from the spec wins over the run's.
func TestProjectDrive(t *testing.T) {
	r := New("bench")
	r.Runs = []Run{{Policy: "none", ElapsedSec: 100, WriteGBps: F64(1), ChunksHit: 1000,
		HostWAF: &WAF{Source: SourceModelled, HostBytes: 100e9, MediaBytes: 200e9}}}
	d, err := ParseDrive("tbw=1000")
	if err != nil {
		t.Fatal(err)
	}
	r.ProjectDrive(d, 256)
	l := r.DriveLife[0]
	if l.WAF != 2 || *l.HostRate != 1e9 || l.RateSource != "measured" {
		t.Fatalf("%+v", l)
	}
	if want := 1000e12 / (1e9 * 2) / 86400; math.Abs(*l.LifeDays/want-1) > 1e-12 {
		t.Errorf("life %g days, want %g", *l.LifeDays, want)
	}
	if want := 200e9 / 256000.0; *l.FlashPerToken != want || math.Abs(*l.TokensPerTB-1e12/want) > 1e-6 {
		t.Errorf("flash/token %g tokens/TB %g", *l.FlashPerToken, *l.TokensPerTB)
	}
	if l.HostBytes != 500e12 {
		t.Errorf("host bytes to wear-out %g", l.HostBytes)
	}
	d.HostRate = 0
	d.ReqRate = 2
	r.Runs[0].Requests = 50
	r.DriveLife = nil
	r.ProjectDrive(d, 256)
	if l := r.DriveLife[0]; *l.HostRate != 4e9 || l.RateSource != "--drive req-rate" {
		t.Errorf("req-rate: %+v", l)
	}
	d.ReqRate = 0
	d.HostRate = 5e8
	r.DriveLife = nil
	r.ProjectDrive(d, 256)
	if l := r.DriveLife[0]; *l.HostRate != 5e8 || l.RateSource != "--drive host-rate" {
		t.Errorf("spec rate not used: %+v", l)
	}
}

// In a size sweep a dwpd rating is over each point's size, unless capacity= fixed it.
func TestProjectDriveSizeSweep(t *testing.T) {
	r := New("simulate")
	r.Sweep = "size"
	w := &WAF{Source: SourceModelled, HostBytes: 1e9, MediaBytes: 1e9}
	r.Runs = []Run{{Policy: "none", Param: 1e12, HostWAF: w}, {Policy: "none", Param: 2e12, HostWAF: w}}
	d, _ := ParseDrive("dwpd=1,years=1")
	r.ProjectDrive(d, 0)
	if a, b := r.DriveLife[0].HostBytes, r.DriveLife[1].HostBytes; a != 365e12 || b != 730e12 {
		t.Errorf("host bytes to wear-out %g, %g; want 365e12, 730e12", a, b)
	}
	d, _ = ParseDrive("dwpd=1,years=1,capacity=1000000000000")
	r.DriveLife = nil
	r.ProjectDrive(d, 0)
	if b := r.DriveLife[1].HostBytes; b != 365e12 {
		t.Errorf("capacity= given: %g, want 365e12", b)
	}
}
