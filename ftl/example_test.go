package ftl_test

import (
	"fmt"

	"github.com/rbctl/rbctl/ftl"
)

// A shadow model: two persistently isolated handles, sequential precondition, and a WAF
// measured over a window that excludes the precondition.
func Example() {
	m, err := ftl.New(ftl.Config{
		MappingUnit:  4096,
		LogicalBytes: 64 << 20, // 16,384 units
		OP:           0.25,
		RUBytes:      1 << 20, // 256 units
		Handles:      2,
		Isolation:    ftl.PersistentlyIsolated,
	})
	if err != nil {
		panic(err)
	}
	if err := m.Precondition(ftl.Sequential); err != nil {
		panic(err)
	}
	w := m.Window()
	// Handle 1 rewrites the first 4 MiB again and again; its RUs die whole.
	for range 20 {
		if err := m.WriteBytes(0, 4<<20, 1); err != nil {
			panic(err)
		}
	}
	s := w.Stats()
	fmt.Printf("host %d MiB, media %d MiB, WAF %.2f, RUs %d\n", s.HostBytes>>20, s.MediaBytes>>20, s.WAF(), s.TotalRUs)
	// Output: host 80 MiB, media 80 MiB, WAF 1.00, RUs 80
}

func ExampleGreedyWAF() {
	for _, rho := range []float64{0.07, 0.28, 0.5} {
		fmt.Printf("ρ=%.2f WAF %.2f\n", rho, ftl.GreedyWAF(rho))
	}
	// Output:
	// ρ=0.07 WAF 7.82
	// ρ=0.28 WAF 2.48
	// ρ=0.50 WAF 1.72
}
