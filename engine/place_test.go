package engine_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// handleRecorder is a device that remembers the handle of every write it is given, split
// into data-slot writes (at or above dataBase) and metadata writes, in submission order.
type handleRecorder struct {
	blockdev.Device
	handles  int // Info().Handles to report
	dataBase int64
	mu       sync.Mutex
	data     []placement.Handle
	meta     []placement.Handle
}

func (r *handleRecorder) Info() blockdev.Info {
	i := r.Device.Info()
	i.Handles = r.handles
	return i
}

func (r *handleRecorder) Submit(ops []blockdev.Op) error {
	r.mu.Lock()
	for _, op := range ops {
		if !op.Write {
			continue
		}
		if op.Off >= r.dataBase {
			r.data = append(r.data, op.Handle)
		} else {
			r.meta = append(r.meta, op.Handle)
		}
	}
	r.mu.Unlock()
	return r.Device.Submit(ops)
}

// answers wraps a policy and records what it answered for data writes and the writes it
// was asked about.
type answers struct {
	placement.Policy
	mu     sync.Mutex
	data   []placement.Handle
	writes []placement.Write
}

func (a *answers) Place(w placement.Write) placement.Handle {
	h := a.Policy.Place(w)
	if !w.Metadata {
		a.mu.Lock()
		a.data = append(a.data, h)
		a.writes = append(a.writes, w)
		a.mu.Unlock()
	}
	return h
}

func placeConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = 8192
	cfg.MetaTotalBytes = 1 << 20
	cfg.Periodic = false
	return cfg
}

// A handle flows unchanged from the policy through the engine to the device op, and is
// what EntryMeta records; a handle the device cannot take is refused with ErrBadHandle and
// nothing is written for that key.
func TestHandleFlowsPolicyToDevice(t *testing.T) {
	for _, tc := range []struct {
		spec        string
		specHandles int // handles the policy is built for
		devHandles  int // handles the device reports
		wantErr     bool
	}{
		{"none", 8, 8, false},
		{"static:5", 8, 8, false},
		{"round-robin", 8, 8, false},
		{"metadata-class+cache-salt", 8, 8, false},
		{"static:3", 4, 0, false},        // a device without placement ignores handles: accepted
		{"static:9", 10, 8, true},        // beyond the device's 8 handles
		{"round-robin", 12, 8, true},     // some answers beyond the device
		{"static:40000", 40001, 0, true}, // beyond what a slot record can hold
		{"metadata-class", 2, 8, false},  // data on 0, checkpoints on 1
		{"metadata-class", 16, 8, true},  // checkpoint handle 15 refused at Format
	} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.spec, tc.specHandles, tc.devHandles), func(t *testing.T) {
			pol, err := placement.Parse(tc.spec, tc.specHandles)
			if err != nil {
				t.Fatal(err)
			}
			ans := &answers{Policy: pol}
			cfg := placeConfig()
			cfg.Placer = ans
			if tc.wantErr && tc.spec != "metadata-class" {
				cfg.MetadataHandle = 0 // the data writes are under test, not the checkpoint
			}
			dev := &handleRecorder{Device: blockdev.NewMem(8<<20, 4096), handles: tc.devHandles, dataBase: cfg.MetaTotalBytes}
			e, err := engine.Format(dev, cfg)
			if tc.spec == "metadata-class" && tc.wantErr {
				if !errors.Is(err, engine.ErrBadHandle) {
					t.Fatalf("Format with checkpoint handle 15 on 8 handles: %v, want ErrBadHandle", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var keys []engine.Key
			var vals [][]byte
			for i := range 12 {
				keys = append(keys, engine.ObjectKey("m/x", uint32(i%3), []byte{byte(i), 1}, fmt.Sprint("salt", i%4)))
				vals = append(vals, []byte{byte(i)})
			}
			res, err := e.PutMany(keys, vals)
			if tc.wantErr {
				if !errors.Is(err, engine.ErrBadHandle) {
					t.Fatalf("PutMany: %v, want ErrBadHandle", err)
				}
				for i, ok := range res.Results {
					h := ans.data[i]
					valid := h == placement.None || (h >= 0 && h < 1<<15-1 && (tc.devHandles == 0 || int(h) < tc.devHandles))
					if ok != valid {
						t.Fatalf("key %d on handle %d: stored %v, want %v", i, h, ok, valid)
					}
				}
				if len(dev.data) != len(res.Stored) {
					t.Fatalf("%d data writes for %d stored keys", len(dev.data), len(res.Stored))
				}
				return
			}
			if err != nil || len(res.Stored) != len(keys) {
				t.Fatalf("PutMany: %v, stored %d of %d", err, len(res.Stored), len(keys))
			}
			if fmt.Sprint(dev.data) != fmt.Sprint(ans.data) {
				t.Fatalf("device saw handles %v, policy answered %v", dev.data, ans.data)
			}
			for i, k := range keys {
				m, ok := e.Lookup(k)
				if !ok || m.Handle != ans.data[i] {
					t.Fatalf("key %d: EntryMeta.Handle %d (found %v), policy answered %d", i, m.Handle, ok, ans.data[i])
				}
				w := ans.writes[i]
				if w.Model != "m/x" || w.KVRank != uint64(i%3) || w.CacheSalt != fmt.Sprint("salt", i%4) || w.Identity != k.Identity() ||
					w.Namespace != string(engine.NamespaceObject) || w.Key != k.String() || w.ChunkIndex != -1 || w.Size != 1 || w.Metadata {
					t.Fatalf("key %d described as %+v", i, w)
				}
			}
			if err := e.CheckpointNow(); err != nil {
				t.Fatal(err)
			}
			want := pol.Place(placement.Write{Metadata: true})
			if got := dev.meta[len(dev.meta)-1]; tc.spec != "round-robin" && got != want {
				t.Fatalf("checkpoint written on handle %d, the policy gives metadata %d", got, want)
			}
		})
	}
}

// BenchmarkPutPlaced reports puts per second of 4 KiB payloads through a cache-salt policy
// on a memory device: the cost the placement description and handle check add to a put.
func BenchmarkPutPlaced(b *testing.B) {
	for _, spec := range []string{"", "metadata-class+cache-salt"} {
		name := spec
		if name == "" {
			name = "no-policy"
		}
		b.Run(name, func(b *testing.B) {
			cfg := placeConfig()
			cfg.SlotBytes = 8192
			if spec != "" {
				pol, err := placement.Parse(spec, 8)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Placer = pol
			}
			e, err := engine.Format(blockdev.NewMem(64<<20, 0), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const batch = 64
			keys := make([]engine.Key, batch)
			vals := make([][]byte, batch)
			for i := range vals {
				vals[i] = make([]byte, 4096)
			}
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				for i := range keys {
					keys[i] = engine.ObjectKey("my/model", 1, []byte{byte(n >> 16), byte(n >> 8), byte(n), byte(i)}, fmt.Sprint("t", i%4))
				}
				if _, err := e.PutMany(keys, vals); err != nil {
					b.Fatal(err)
				}
				e.DeleteMany(keys, true)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}
