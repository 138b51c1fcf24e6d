package workloads

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestQueueStats: the depth over time of four ops worked by hand (ms): due 0 done 10 (twice),
// due 5 done 20, due 30 done 40. Depth 2 over [0,5), 3 over [5,10), 1 over [10,20), 0 over
// [20,30), 1 over [30,40).
func TestQueueStats(t *testing.T) {
	var q queueLog
	ms := time.Millisecond
	for _, e := range [][2]time.Duration{{0, 10 * ms}, {0, 10 * ms}, {5 * ms, 20 * ms}, {30 * ms, 40 * ms}} {
		q.add(e[0], e[1])
	}
	s := q.stats()
	if s.Ops != 4 || s.Seconds != 0.04 || s.P50 != 1 || s.P90 != 3 || s.P99 != 3 || s.Max != 3 {
		t.Fatalf("stats %+v", s)
	}
	want := []DepthShare{{0, 0, 0.25}, {1, 1, 0.5}, {2, 3, 0.25}}
	if len(s.Depth) != len(want) {
		t.Fatalf("depth %+v", s.Depth)
	}
	for i, d := range s.Depth {
		if d.Min != want[i].Min || d.Max != want[i].Max || math.Abs(d.Share-want[i].Share) > 1e-9 {
			t.Errorf("bucket %d: %+v, want %+v", i, d, want[i])
		}
	}
	// 16 intervals of 2.5 ms: [0,2.5) at depth 2, [5,7.5) at 3; the two first ops finish
	// in interval 4 after 10 ms, the third in 8 after 15 ms, the last in 15.
	iv := s.Intervals
	if len(iv) != QueueIntervals || iv[0].MeanDepth != 2 || iv[0].MaxDepth != 2 || iv[2].MeanDepth != 3 || iv[2].MaxDepth != 3 ||
		iv[4].Ops != 2 || iv[4].P50Us != 10000 || iv[8].Ops != 1 || iv[8].P99Us != 15000 || iv[15].Ops != 1 || iv[15].EndSeconds != 0.04 {
		t.Fatalf("intervals %+v", iv)
	}
	var none queueLog
	if none.stats() != nil {
		t.Error("stats of no op")
	}
}

// A run with arrival times logs every op's queueing; a closed loop logs none.
func TestDriverQueue(t *testing.T) {
	for _, rate := range []float64{0, 20000} {
		g, _ := NewSynthetic(SyntheticConfig{Pattern: "uniform", Keys: 100, Size: 4096, Ops: 500, Seed: 1, ReadFrac: 0.5})
		d, err := NewDriver(DriverConfig{Rate: rate, Workers: 2}, g, newMapBackend(1000))
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rate == 0 && res.Queue != nil {
			t.Fatalf("closed loop: queue %+v", res.Queue)
		}
		if rate > 0 {
			q := res.Queue
			var share float64
			for _, b := range q.Depth {
				share += b.Share
			}
			if q == nil || q.Ops != 500 || math.Abs(share-1) > 1e-9 || q.Max < 1 {
				t.Fatalf("rate %g: queue %+v, shares %g", rate, q, share)
			}
		}
	}
}
