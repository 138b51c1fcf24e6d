package workloads

import (
	"math"
	"math/rand/v2"
)

// mix is splitmix64's finaliser: a cheap bijective hash used to derive chunk hashes.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hash2 combines two words into a chunk hash.
func hash2(a, b uint64) uint64 { return mix(mix(a) ^ b) }

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)) }

// Zipf draws integers in [0, n) with P(i) ∝ 1/(i+1)^theta, for any theta ≥ 0 (theta = 0 is
// uniform). It uses Gray et al.'s rejection-free method ("Quickly generating billion-record
// synthetic databases", SIGMOD '94), as YCSB does, because math/rand's Zipf needs s > 1 and
// KV-cache prefix popularity is usually modelled with theta below 1.
type Zipf struct {
	n                   uint64
	theta               float64
	alpha, zetan, eta   float64
	zeta2, halfPowTheta float64
}

// NewZipf prepares a sampler over [0, n).
func NewZipf(n uint64, theta float64) *Zipf {
	if n == 0 {
		n = 1
	}
	z := &Zipf{n: n, theta: theta}
	if theta == 0 || n == 1 {
		return z
	}
	if theta == 1 {
		theta = 0.9999 // the closed form divides by 1-theta
		z.theta = theta
	}
	z.zetan = zeta(n, theta)
	z.zeta2 = zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - z.zeta2/z.zetan)
	z.halfPowTheta = 1 + math.Pow(0.5, theta)
	return z
}

func zeta(n uint64, theta float64) float64 {
	var s float64
	for i := uint64(1); i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

// Next draws one value.
func (z *Zipf) Next(r *rand.Rand) uint64 {
	if z.n == 1 {
		return 0
	}
	if z.theta == 0 {
		return r.Uint64N(z.n)
	}
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.halfPowTheta {
		return 1
	}
	v := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= z.n {
		v = z.n - 1
	}
	return v
}

// around draws an integer uniformly in [mean/2, 3·mean/2] (mean itself when mean < 2).
func around(r *rand.Rand, mean int) int {
	if mean < 2 {
		return mean
	}
	lo := mean / 2
	return lo + r.IntN(mean+1)
}
