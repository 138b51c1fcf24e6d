package resp

import (
	"bytes"
	"strings"
	"testing"
)

// Every value from pooledBulk up has a class whose buffers hold it with less than a quarter
// to spare, and a buffer goes back to the class it was lent from.
func TestBulkClass(t *testing.T) {
	last := -1
	for l := int64(pooledBulk); l < 1<<36; l += l/7 + 1 {
		for _, v := range []int64{l, l + 1, l + 4095} {
			c, size := bulkClass(v)
			if size < v || 4*(size-v) > v {
				t.Fatalf("bulkClass(%d) = %d bytes", v, size)
			}
			if back, _ := bulkClass(size); back != c {
				t.Fatalf("a %d-byte value is lent from class %d and given back to %d", v, c, back)
			}
			if c < last || c >= len(bulkPools) {
				t.Fatalf("bulkClass(%d) = class %d after %d (of %d)", v, c, last, len(bulkPools))
			}
			last = c
		}
	}
	if _, size := bulkClass(256 << 10); size != 256<<10 {
		t.Fatalf("a 256 KiB value takes %d bytes", size)
	}
}

// Only SET's and MSET's values are read into lent buffers (the stores are done with them
// when the command returns); keys and any other command's arguments are the request's own,
// and may be kept past it. The values of one request never share a buffer, and every buffer
// goes back at Release.
func TestOnlyValuesAreLent(t *testing.T) {
	big := func(c byte) string { return strings.Repeat(string(c), pooledBulk+100) }
	for _, c := range []struct {
		args []string
		lent []int // arguments read into lent buffers
	}{
		{[]string{"SET", "k", big('a')}, []int{2}},
		{[]string{"set", big('k'), big('a'), "EX", "10"}, []int{2}},
		{[]string{"MSET", "k1", big('a'), big('k'), big('b'), "k3", "small"}, []int{2, 4}},
		{[]string{"GET", big('k')}, nil},
		{[]string{"CLIENT", "SETNAME", big('n')}, nil},
		{[]string{"SETX", "k", big('a')}, nil},
		{[]string{"SET", "k", strings.Repeat("a", pooledBulk-1)}, nil},
	} {
		rd := NewReader(strings.NewReader(cmd(c.args...)+cmd(c.args...)), Limits{})
		for range 2 { // the second reads into buffers given back by the first's Release
			args, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			if len(rd.lent) != len(c.lent) {
				t.Fatalf("%.12q: %d buffers lent, want %d", c.args, len(rd.lent), len(c.lent))
			}
			for j, i := range c.lent {
				if &args[i][0] != &rd.lent[j].b[0] {
					t.Fatalf("%.12q: argument %d is not in lent buffer %d", c.args, i, j)
				}
			}
			for i, a := range args {
				if !bytes.Equal(a, []byte(c.args[i])) {
					t.Fatalf("%.12q: argument %d read as %.12q", c.args, i, a)
				}
			}
		}
		rd.Release()
		if len(rd.lent) != 0 {
			t.Fatalf("%.12q: %d buffers still lent after Release", c.args, len(rd.lent))
		}
	}
}
