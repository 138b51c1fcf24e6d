package cluster

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestMetaRoundTripAndRejections(t *testing.T) {
	b, err := encodeMeta("10.0.0.1:7000", "[::1]:7001")
	if err != nil {
		t.Fatal(err)
	}
	if c, d, err := decodeMeta(b); err != nil || c != "10.0.0.1:7000" || d != "[::1]:7001" {
		t.Fatalf("decodeMeta = %q %q %v", c, d, err)
	}
	if _, err := encodeMeta("no-port", ""); err == nil {
		t.Fatal("encodeMeta accepted an address without a port")
	}
	for name, bad := range map[string][]byte{
		"empty":    nil,
		"version":  {2, 0, 0},
		"short":    {1, 5, 'a'},
		"trailing": append(append([]byte{}, b...), 0),
		"not addr": {1, 3, 'a', 'b', 'c', 0},
	} {
		if _, _, err := decodeMeta(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: decodeMeta(%x) = %v; want ErrMalformed", name, bad, err)
		}
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	d := delta{origin: "node-1", epoch: 7, from: 41, positions: []uint32{3, 5 | positionValue, 1<<31 - 1}}
	m, err := decodeMessage(d.encode(), 1<<20)
	if err != nil || m.delta == nil || !reflect.DeepEqual(*m.delta, d) {
		t.Fatalf("delta: %+v, %v", m.delta, err)
	}
	f := full{origin: "n", epoch: 9, version: 3, filter: newBitFilter(geometry{bits: 128, hashes: 4})}
	f.filter.set(100, true)
	m, err = decodeMessage(f.encode(), 1<<20)
	if err != nil || m.full == nil || m.full.epoch != 9 || m.full.version != 3 || !reflect.DeepEqual(m.full.filter, f.filter) {
		t.Fatalf("full: %+v, %v", m.full, err)
	}
	dg := digest{origin: "x", epoch: 3, version: 4}
	m, err = decodeMessage(dg.encode(), 1<<20)
	if err != nil || m.digest == nil || *m.digest != dg {
		t.Fatalf("digest: %+v, %v", m.digest, err)
	}
	m, err = decodeMessage(encodeWant("asker"), 1<<20)
	if err != nil || m.want != "asker" {
		t.Fatalf("want: %+v, %v", m, err)
	}
	if n := len(delta{origin: string(bytes.Repeat([]byte("n"), maxNameLen)), positions: make([]uint32, maxDeltaPositions)}.encode()); n > maxDeltaBytes {
		t.Fatalf("largest delta is %d bytes, above %d", n, maxDeltaBytes)
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	good := full{origin: "n", epoch: 1, version: 1, filter: newBitFilter(geometry{bits: 128, hashes: 4})}.encode()
	withGeometry := func(bits uint32, k byte) []byte {
		b := append([]byte{}, good...)
		off := 2 + 1 + 16
		b[off], b[off+1], b[off+2], b[off+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		b[off+4] = k
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"kind", []byte{9, 1, 'n'}, ErrMalformed},
		{"bad name", []byte{kindWant, 2, '.', 'x'}, ErrMalformed},
		{"empty name", []byte{kindWant, 0}, ErrMalformed},
		{"delta count", append(delta{origin: "n", positions: []uint32{1, 2}}.encode(), 0), ErrMalformed},
		{"delta short", delta{origin: "n", positions: []uint32{1}}.encode()[:10], ErrMalformed},
		{"full truncated", good[:len(good)-1], ErrMalformed},
		{"full trailing", append(append([]byte{}, good...), 0), ErrMalformed},
		{"bits not words", withGeometry(100, 4), ErrMalformed},
		{"no hashes", withGeometry(128, 0), ErrMalformed},
		{"too many hashes", withGeometry(128, 17), ErrMalformed},
		{"above cap", withGeometry(1<<20, 4), ErrFilterTooLarge},
	} {
		if _, err := decodeMessage(tc.b, 4096); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(delta{origin: "a", epoch: 1, from: 2, positions: []uint32{1, 1 << 31}}.encode())
	f.Add(full{origin: "b", filter: newBitFilter(geometry{bits: 64, hashes: 2})}.encode())
	f.Add(encodeWant("c"))
	f.Add(digest{origin: "d", epoch: 1, version: 2}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b, 1<<16)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		var again []byte
		switch {
		case m.delta != nil:
			again = m.delta.encode()
		case m.full != nil:
			if m.full.filter.bytes() > 1<<16 {
				t.Fatalf("filter of %d bytes passed a cap of %d", m.full.filter.bytes(), 1<<16)
			}
			again = m.full.encode()
		case m.digest != nil:
			again = m.digest.encode()
		default:
			again = encodeWant(m.want)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode(%x) re-encodes as %x", b, again)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	b, _ := encodeMeta("127.0.0.1:1", "")
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, d, err := decodeMeta(b)
		if err != nil {
			return
		}
		again, err := encodeMeta(c, d)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decodeMeta(%x) = %q %q re-encodes as %x, %v", b, c, d, again, err)
		}
	})
}
