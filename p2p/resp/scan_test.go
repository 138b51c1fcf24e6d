package resp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
)

// scanCall sends SCAN cur COUNT count on c and reads the reply: the next cursor, the keys and
// the reply's length in bytes.
func scanCall(t *testing.T, c net.Conn, br *bufio.Reader, cur, count string) (string, []string, int) {
	t.Helper()
	if _, err := io.WriteString(c, cmd("SCAN", cur, "COUNT", count)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	size := 0
	line := func() string {
		s, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("SCAN reply: %v", err)
		}
		size += len(s)
		return strings.TrimSuffix(s, "\r\n")
	}
	if h := line(); h != "*2" {
		t.Fatalf("SCAN reply starts %q", h)
	}
	line()
	next := line()
	n, err := strconv.Atoi(strings.TrimPrefix(line(), "*"))
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, n)
	for range n {
		line()
		keys = append(keys, line())
	}
	return next, keys, size
}

// One SCAN call lists at most ScanBytes of keys (and one key more) whatever its COUNT, with a
// cursor to go on from; a client that loops until the cursor is 0 lists every key exactly
// once. Hostile battery: 40 clients each sending SCAN 0 COUNT 100000000 to a cache of 22,016
// keys of 1,000 bytes, reading nothing, held ~15 MB each (the whole reply was built).
func TestScanReplyIsBounded(t *testing.T) {
	store := newMem(16)
	const n = 3000 // 3 MB of keys
	want := map[string]bool{}
	for i := range n {
		k := fmt.Sprintf("m/x@00000000@0@%04x@", i)
		k += strings.Repeat("s", 1000-len(k)) // a 1,000-byte key (salt)
		want[k] = true
		store.Set(store.Key([]byte(k)), []byte("v"))
	}
	c, err := net.Dial("tcp", serve(t, &Server{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// The reply: ScanBytes of names and one more, each framed in $1000\r\n...\r\n.
	bound := func(keys int) int { return ScanBytes + 1000 + 16*keys + 64 }
	next, keys, size := scanCall(t, c, br, "0", "100000000")
	if next == "0" || len(keys) == 0 || size > bound(len(keys)) || len(keys) > ScanBytes/1000+1 {
		t.Fatalf("SCAN 0 COUNT 100000000: cursor %s, %d keys, a reply of %d bytes (bound %d)", next, len(keys), size, ScanBytes)
	}
	seen := map[string]bool{}
	cur, calls := "0", 0
	for {
		next, keys, size := scanCall(t, c, br, cur, "100000000")
		calls++
		if size > bound(len(keys)) || len(keys) > ScanBytes/1000+1 {
			t.Fatalf("a SCAN reply of %d bytes", size)
		}
		for _, k := range keys {
			if seen[k] || !want[k] {
				t.Fatalf("SCAN listed %.30q... twice, or a key never stored", k)
			}
			seen[k] = true
		}
		if cur = next; cur == "0" || calls > 100 {
			break
		}
	}
	if len(seen) != n || calls < 3 {
		t.Fatalf("a full SCAN listed %d of %d keys in %d calls", len(seen), n, calls)
	}
}

// scanKeys, the walk NodeStore and EngineStore scan with, stops once the names listed hold
// maxBytes and goes on from there: every key once, whatever count asks.
func TestScanKeysStopsAtItsByteBound(t *testing.T) {
	var all []engine.Key
	for i := range 3000 {
		b := []byte(fmt.Sprintf("%04d", i) + strings.Repeat("k", 996)) // a 1,000-byte generic key
		all = append(all, engine.ObjectKey(GenericModel, 0, b, ""))
	}
	walk := func(fn func(engine.Key) bool) {
		for _, k := range all {
			if !fn(k) {
				return
			}
		}
	}
	seen := map[string]bool{}
	cur, calls := uint64(0), 0
	for {
		keys, next := scanKeys(walk, cur, ScanCount, ScanBytes)
		calls++
		bytes := 0
		for _, k := range keys {
			bytes += len(k)
			if seen[k] || len(k) != 1000 {
				t.Fatalf("listed %.20q... (%d bytes) twice or wrongly named", k, len(k))
			}
			seen[k] = true
		}
		if bytes > ScanBytes+1000 || (next != 0 && len(keys) == 0) {
			t.Fatalf("call %d from %d: %d keys, %d bytes, next %d", calls, cur, len(keys), bytes, next)
		}
		if cur = next; cur == 0 || calls > 100 {
			break
		}
	}
	if len(seen) != len(all) || calls != 3 {
		t.Fatalf("listed %d of %d keys in %d calls", len(seen), len(all), calls)
	}
	if keys, next := scanKeys(walk, 5, 2, ScanBytes); len(keys) != 2 || next != 7 {
		t.Fatalf("COUNT 2 from 5: %d keys, next %d", len(keys), next)
	}
	if keys, next := scanKeys(walk, 2999, 10, ScanBytes); len(keys) != 1 || next != 0 {
		t.Fatalf("the last key: %d keys, next %d", len(keys), next)
	}
}
