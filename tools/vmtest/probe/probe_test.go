package probe

import (
	"encoding/binary"
	"errors"
	"testing"
)

// qemuCtrl builds an Identify Controller buffer shaped like QEMU 7.2's answer.
func qemuCtrl() []byte {
	b := make([]byte, IdentifySize)
	binary.LittleEndian.PutUint16(b[0:], 0x1b36)
	copy(b[4:24], "deadbeef            ")
	copy(b[24:64], "QEMU NVMe Ctrl                          ")
	copy(b[64:72], "7.2.0   ")
	b[77] = 7
	binary.LittleEndian.PutUint32(b[96:], 0x8000)
	binary.LittleEndian.PutUint16(b[256:], 0x000a)
	binary.LittleEndian.PutUint32(b[516:], 256)
	binary.LittleEndian.PutUint16(b[520:], 0x015d)
	return b
}

func TestDecodeController(t *testing.T) {
	c, err := DecodeController(qemuCtrl())
	if err != nil {
		t.Fatal(err)
	}
	want := Controller{VID: 0x1b36, Serial: "deadbeef", Model: "QEMU NVMe Ctrl", Firmware: "7.2.0",
		MDTS: 7, CTRATT: 0x8000, OACS: 0x000a, NN: 256, ONCS: 0x015d}
	if c != want {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	if _, err := DecodeController(make([]byte, 100)); !errors.Is(err, ErrShortIdentify) {
		t.Fatalf("short buffer: got %v, want ErrShortIdentify", err)
	}
}

func TestDecodeNamespace(t *testing.T) {
	mk := func(nlbaf, flbas byte, lbafs ...[2]int) []byte { // each lbaf: {ms, ds}
		b := make([]byte, IdentifySize)
		binary.LittleEndian.PutUint64(b[0:], 262144)
		binary.LittleEndian.PutUint64(b[8:], 262144)
		b[25], b[26] = nlbaf, flbas
		for i, f := range lbafs {
			binary.LittleEndian.PutUint16(b[128+4*i:], uint16(f[0]))
			b[128+4*i+2] = byte(f[1])
		}
		return b
	}
	tests := []struct {
		name    string
		buf     []byte
		want    Namespace
		wantErr error
	}{
		{"4k format 0", mk(0, 0, [2]int{0, 12}), Namespace{NSZE: 262144, NCAP: 262144, LBADataSize: 4096}, nil},
		{"512 with metadata, format 1", mk(1, 1, [2]int{0, 12}, [2]int{8, 9}),
			Namespace{NSZE: 262144, NCAP: 262144, LBAFormat: 1, LBADataSize: 512, MetadataSize: 8}, nil},
		{"format beyond nlbaf", mk(0, 3, [2]int{0, 12}), Namespace{}, ErrBadLBAFormat},
		{"data size below 512", mk(0, 0, [2]int{0, 8}), Namespace{}, ErrBadLBAFormat},
		{"short", make([]byte, 10), Namespace{}, ErrShortIdentify},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeNamespace(tt.buf)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	ns, _ := DecodeNamespace(mk(0, 0, [2]int{0, 12}))
	if ns.Bytes() != 1<<30 {
		t.Fatalf("Bytes() = %d, want 1 GiB", ns.Bytes())
	}
}

func TestCompareIdentifyJSON(t *testing.T) {
	nvmeCLI := []byte(`{"vid":6966,"sn":"deadbeef            ","mn":"QEMU NVMe Ctrl                          ","fr":"7.2.0   ","ctratt":32768,"oncs":349}`)
	tests := []struct {
		name        string
		other       string
		wantEqual   int
		wantMissing int
	}{
		{"flat nvme-cli spelling", `{"sn":"deadbeef","mn":"QEMU NVMe Ctrl","fr":"7.2.0","ctratt":32768,"oncs":349}`, 5, 0},
		{"nested, other spellings, hex strings", `{"controller":{"serial":"deadbeef","model_number":"QEMU NVMe Ctrl","firmware":"7.2.0","CTRATT":"0x8000","oncs":"0x15d"},"namespace":{"nsze":1}}`, 5, 0},
		{"one field wrong, two missing", `{"serial":"deadbeef","model":"QEMU","firmware":"7.2.0"}`, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := CompareIdentifyJSON(nvmeCLI, []byte(tt.other))
			if err != nil {
				t.Fatal(err)
			}
			eq, miss := 0, 0
			for _, r := range res {
				if r.Equal {
					eq++
				}
				if r.Missing {
					miss++
				}
			}
			if eq != tt.wantEqual || miss != tt.wantMissing {
				t.Fatalf("equal %d missing %d, want %d and %d: %+v", eq, miss, tt.wantEqual, tt.wantMissing, res)
			}
		})
	}
	if _, err := CompareIdentifyJSON(nvmeCLI, []byte("serial: x")); !errors.Is(err, ErrNotJSON) {
		t.Fatalf("got %v, want ErrNotJSON", err)
	}
}

func FuzzDecodeIdentify(f *testing.F) {
	f.Add(qemuCtrl())
	f.Add(make([]byte, IdentifySize))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeController(b)
		if err == nil && len(c.Serial) > ctrlSNLen {
			t.Fatalf("serial longer than its field: %q", c.Serial)
		}
		ns, err := DecodeNamespace(b)
		if err == nil && (ns.LBADataSize < 512 || ns.LBAFormat >= 64) {
			t.Fatalf("accepted impossible format: %+v", ns)
		}
	})
}
