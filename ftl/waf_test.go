package ftl

import (
	"math"
	"math/bits"
	"testing"
)

// rng is xorshift64*: deterministic and fast enough to not dominate the model's cost.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 2685821657736338717
}

// below returns a uniform value in [0, n) (Lemire's multiply-shift).
func (r *rng) below(n uint64) uint64 {
	hi, _ := bits.Mul64(r.next(), n)
	return hi
}

// steadyGreedyWAF fills the device sequentially, warms up with warm× logical capacity of
// uniform random single-unit writes, then returns the WAF over meas× capacity.
func steadyGreedyWAF(t testing.TB, rho float64, rus int, unitsPerRU int64, warm, meas float64) float64 {
	t.Helper()
	const mu = 4096
	logicalUnits := int64(float64(int64(rus)*unitsPerRU) / (1 + rho))
	m, err := New(Config{MappingUnit: mu, LogicalBytes: logicalUnits * mu, RUBytes: unitsPerRU * mu, RUsPerGroup: rus})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.FillSequential(); err != nil {
		t.Fatal(err)
	}
	r := rng(0x9e3779b97f4a7c15)
	n := uint64(logicalUnits)
	for range int64(warm * float64(logicalUnits)) {
		if err := m.Write(int64(r.below(n)), 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	w := m.Window()
	for range int64(meas * float64(logicalUnits)) {
		if err := m.Write(int64(r.below(n)), 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	return w.Stats().WAF()
}

func TestGreedyMatchesLambertW(t *testing.T) {
	rhos := []float64{0.07, 0.28, 0.5}
	if testing.Short() {
		rhos = rhos[1:] // ρ = 0.07 costs ~7 relocations per write
	}
	for _, rho := range rhos {
		got := steadyGreedyWAF(t, rho, 2000, 512, 1.5, 1)
		want := GreedyWAF(rho)
		t.Logf("rho=%.2f model WAF %.4f, Lambert-W %.4f, error %+.2f%%", rho, got, want, 100*(got/want-1))
		if math.Abs(got/want-1) > 0.03 {
			t.Errorf("rho=%.2f: model WAF %.4f not within 3%% of Lambert-W %.4f", rho, got, want)
		}
	}
}
