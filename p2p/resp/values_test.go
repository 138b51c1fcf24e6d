package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The value pool's heap spares are bounded by the server's request budget: with its one
// arena buffer lent, a spare takes its bytes from the budget while it is lent, a further
// one waits for them (ErrBusy past its wait, or its context's end), and giving a spare back
// returns its bytes; arena buffers are kept and lent again.
func TestValuePoolSparesWithinBudget(t *testing.T) {
	p, err := NewValuePool(5000, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Size() != 8192 {
		t.Fatalf("Size %d, want 8192 (whole pages)", p.Size())
	}
	b := NewBudget(8192)
	ctx := context.Background()
	a, err := p.take(ctx, b, time.Millisecond)
	if err != nil || !p.owns(a) || len(a) != 8192 {
		t.Fatalf("first take: arena %v len %d err %v", p.owns(a), len(a), err)
	}
	s, err := p.take(ctx, b, time.Millisecond)
	if err != nil || p.owns(s) || len(s) != 8192 {
		t.Fatalf("second take: arena %v len %d err %v", p.owns(s), len(s), err)
	}
	if b.Stats().Used != 8192 {
		t.Fatalf("budget used %d while a spare is lent, want 8192", b.Stats().Used)
	}
	if _, err := p.take(ctx, b, time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("a spare past the budget: %v, want ErrBusy", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.take(cctx, b, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a spare past the budget, context ended: %v", err)
	}
	p.give(s, b)
	if st := b.Stats(); st.Used != 0 {
		t.Fatalf("budget used %d after the spare came back", st.Used)
	}
	p.give(a, b)
	m := map[string]int64{}
	p.stats(m)
	if m["resp_value_lent"] != 0 || m["resp_value_spares"] != 0 || m["resp_value_spares_made"] != 1 {
		t.Fatalf("stats %v", m)
	}
	if a2, _ := p.take(ctx, b, 0); &a2[0] != &a[0] {
		t.Fatal("the arena buffer was not lent again")
	}
}

// GET, MGET and STRLEN over an EngineStore with a value pool of one arena buffer: values
// read into lent buffers are answered byte for byte (no value is loaded outside the pool:
// intoOnly), a miss and a refused key lend nothing for long,
// and every buffer comes back once the replies are written.
func TestGetIntoLentBuffers(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	e := engineOn(t, img, true)
	defer e.Close()
	p, err := NewValuePool(64<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := &Server{Store: intoOnly{EngineStore{e}, t}, Values: p, Budget: NewBudget(1 << 20)}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k1, k2 := "my/model@00000001@0@00a1", "my/model@00000001@0@00a2"
	v1, v2 := strings.Repeat("\r\n\x00a", 9000), strings.Repeat("b", 20<<10) // a copied and a direct bulk
	exchange(t, c, cmd("SET", k1, v1)+cmd("SET", k2, v2), "+OK\r\n+OK\r\n")
	exchange(t, c, cmd("GET", k1)+cmd("GET", "my/model@00000001@0@00ff")+cmd("GET", "not a native key")+cmd("GET", k2),
		"$36000\r\n"+v1+"\r\n$-1\r\n$-1\r\n$20480\r\n"+v2+"\r\n")
	exchange(t, c, cmd("MGET", k2, k1, k2), "*3\r\n$20480\r\n"+v2+"\r\n$36000\r\n"+v1+"\r\n$20480\r\n"+v2+"\r\n")
	exchange(t, c, cmd("STRLEN", k1)+cmd("STRLEN", k2)+cmd("STRLEN", "my/model@00000001@0@00ff")+cmd("STRLEN", "not a native key"),
		":36000\r\n:20480\r\n:0\r\n:0\r\n")
	// The server gives a buffer back after its reply is written, so the client can read
	// the reply first: wait for the state, then check that no spare was ever needed.
	eventually(t, "every lent buffer back after the replies", func() bool { return srv.Stats()["resp_value_lent"] == 0 })
	if st := srv.Stats(); st["resp_value_spares_made"] != 0 {
		t.Fatalf("after the replies: %v", st)
	}
}

// intoOnly is a ValueLoader whose Get, a load into memory of its own, fails the test: with
// a value pool, every value a command reads must be loaded into a lent buffer.
type intoOnly struct {
	EngineStore
	t *testing.T
}

func (s intoOnly) Get(k Key) ([]byte, bool, error) {
	if k.Err == nil { // a refused key is not loaded
		s.t.Errorf("Get(%q) loaded a value outside the value pool", k.Raw)
	}
	return s.EngineStore.Get(k)
}

// A GET's time in the server is counted for each value found and written (resp_get_timed,
// resp_get_us, and the reply's write, resp_get_write_us, a part of it), for GET and each key
// of MGET alike; misses and refused keys are not, and INFO shows the same counters.
func TestGetTimings(t *testing.T) {
	srv := &Server{Store: newMem(1 << 20)}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k1, k2 := "my/model@00000001@0@00a1", "my/model@00000001@0@00a2"
	v1, v2 := strings.Repeat("a", 100), strings.Repeat("b", 200<<10) // a copied and a direct bulk
	exchange(t, c, cmd("SET", k1, v1)+cmd("SET", k2, v2), "+OK\r\n+OK\r\n")
	if st := srv.Stats(); st["resp_get_timed"] != 0 || st["resp_get_us"] != 0 || st["resp_get_write_us"] != 0 {
		t.Fatalf("GET timings before any GET: %v", st)
	}
	exchange(t, c, cmd("GET", k1)+cmd("GET", "my/model@00000001@0@00ff")+cmd("GET", k2),
		"$100\r\n"+v1+"\r\n$-1\r\n$204800\r\n"+v2+"\r\n")
	exchange(t, c, cmd("MGET", k2, "my/model@00000001@0@00fe", k1), "*3\r\n$204800\r\n"+v2+"\r\n$-1\r\n$100\r\n"+v1+"\r\n")
	eventually(t, "four found values timed", func() bool { return srv.Stats()["resp_get_timed"] == 4 })
	st := srv.Stats()
	if st["resp_get_write_us"] < 0 || st["resp_get_write_us"] > st["resp_get_us"] {
		t.Fatalf("reply writes took %d µs of the GETs' %d", st["resp_get_write_us"], st["resp_get_us"])
	}
	info := bulkReply(t, c, cmd("INFO", "stats"))
	for _, k := range []string{"resp_get_timed", "resp_get_us", "resp_get_write_us"} {
		if want := fmt.Sprintf("\r\nrbctl_%s:%d\r\n", k, srv.Stats()[k]); !strings.Contains(info, want) {
			t.Errorf("INFO stats lacks %q:\n%s", strings.TrimSpace(want), info)
		}
	}
}
