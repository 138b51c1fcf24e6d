package fdp

import (
	"encoding/binary"
	"math/big"
	"math/bits"
)

// Uint128 is an unsigned 128-bit counter as FDP statistics carry them (little-endian on the
// wire). Kept exact: nothing is rounded through float64 except by Float64.
type Uint128 struct {
	Lo, Hi uint64
}

// U128 makes a Uint128 from a uint64.
func U128(v uint64) Uint128 { return Uint128{Lo: v} }

// GetUint128 reads 16 little-endian bytes.
func GetUint128(b []byte) Uint128 {
	return Uint128{Lo: binary.LittleEndian.Uint64(b[0:8]), Hi: binary.LittleEndian.Uint64(b[8:16])}
}

// Put writes the value as 16 little-endian bytes.
func (u Uint128) Put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:8], u.Lo)
	binary.LittleEndian.PutUint64(b[8:16], u.Hi)
}

// Add returns u+v modulo 2^128.
func (u Uint128) Add(v Uint128) Uint128 {
	lo, c := bits.Add64(u.Lo, v.Lo, 0)
	hi, _ := bits.Add64(u.Hi, v.Hi, c)
	return Uint128{lo, hi}
}

// Sub returns u−v modulo 2^128 (a counter delta; a device reset makes it wrap).
func (u Uint128) Sub(v Uint128) Uint128 {
	lo, b := bits.Sub64(u.Lo, v.Lo, 0)
	hi, _ := bits.Sub64(u.Hi, v.Hi, b)
	return Uint128{lo, hi}
}

// Less reports u < v.
func (u Uint128) Less(v Uint128) bool { return u.Hi < v.Hi || (u.Hi == v.Hi && u.Lo < v.Lo) }

// IsZero reports u == 0.
func (u Uint128) IsZero() bool { return u.Lo == 0 && u.Hi == 0 }

// Big returns the value as a big.Int.
func (u Uint128) Big() *big.Int {
	b := new(big.Int).SetUint64(u.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(u.Lo))
}

// Float64 returns the nearest float64 (for ratios such as WAF).
func (u Uint128) Float64() float64 { return float64(u.Hi)*0x1p64 + float64(u.Lo) }

// String is the exact decimal value.
func (u Uint128) String() string {
	if u.Hi == 0 {
		return uitoa(u.Lo)
	}
	return u.Big().String()
}

func uitoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}

// MarshalJSON emits a bare JSON number with every digit (as nvme-cli ≥ 2.4 does).
func (u Uint128) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalJSON accepts a JSON number or a decimal string (nvme-cli 2.3 prints strings).
func (u *Uint128) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return ErrBadSize
	}
	mask := new(big.Int).SetUint64(^uint64(0))
	u.Lo = new(big.Int).And(n, mask).Uint64()
	u.Hi = new(big.Int).Rsh(n, 64).Uint64()
	return nil
}
