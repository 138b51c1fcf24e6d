package torture

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The side log is one record per line, each written with fsync before the writer goes on:
//
//	R <entries> <seq> <container>  writer recovered <entries> keys (ready)
//	I <op> <idx> <ver>             intent: about to put (op P) or delete (op D) key idx
//	A <op> <idx> <ver> <ok|fail>   acknowledgement of that operation
//	S <n>                          checkpoint n is about to be requested (CheckpointNow)
//	C <n> <seq>                    checkpoint n completed (engine seq after it)
//	E <n>                          checkpoint n failed
//	X <idx> <ver>                  the writer loaded wrong bytes for a key (must never happen)
//	U <idx> <ver>                  a load of an indexed key returned false
//	T <off> <len>                  a metadata write was torn here; the writer then SIGKILLs itself
//	F                              the writer closed the engine cleanly (final checkpoint)
//
// A last line without its newline was cut by the kill and is ignored.

// Kind is a record type.
type Kind byte

const (
	RecReady   Kind = 'R'
	RecIntent  Kind = 'I'
	RecAck     Kind = 'A'
	RecCkStart Kind = 'S'
	RecCkDone  Kind = 'C'
	RecCkErr   Kind = 'E'
	RecWrong   Kind = 'X'
	RecUnload  Kind = 'U'
	RecTorn    Kind = 'T'
)

// Record is one parsed side-log line.
type Record struct {
	Kind Kind
	Op   byte // 'P' or 'D' for intents and acks
	Idx  uint64
	Ver  uint64
	OK   bool
	N    uint64 // checkpoint number, or entries for R
	Seq  uint64
	Cont int // container for R
}

// sideLog appends fsync'ed records.
type sideLog struct {
	mu sync.Mutex
	f  *os.File
	b  []byte
	n  int // records written
}

func createSideLog(path string) (*sideLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600) // it lists stored keys
	if err != nil {
		return nil, err
	}
	return &sideLog{f: f}, nil
}

func (l *sideLog) put(format string, args ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = fmt.Appendf(l.b[:0], format, args...)
	l.b = append(l.b, '\n')
	if _, err := l.f.Write(l.b); err != nil {
		return err
	}
	l.n++
	return l.f.Sync()
}

func (l *sideLog) close() error { return l.f.Close() }

// ReadLog parses a side log.
func ReadLog(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	r := bufio.NewReader(f)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadString('\n')
		if err != nil { // EOF: a partial last line is a cut write, ignore it
			break
		}
		rec, perr := parseRecord(strings.TrimSuffix(line, "\n"))
		if perr != nil {
			return out, fmt.Errorf("side log %s line %d: %w", path, lineNo, perr)
		}
		out = append(out, rec)
	}
	return out, nil
}

func parseRecord(s string) (Record, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f[0]) != 1 {
		return Record{}, fmt.Errorf("bad record %q", s)
	}
	rec := Record{Kind: Kind(f[0][0])}
	nums := func(want int, from int) ([]uint64, error) {
		if len(f) != from+want {
			return nil, fmt.Errorf("record %q: want %d fields", s, from+want)
		}
		v := make([]uint64, want)
		for i := range v {
			x, err := strconv.ParseUint(f[from+i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("record %q: %w", s, err)
			}
			v[i] = x
		}
		return v, nil
	}
	switch rec.Kind {
	case RecReady:
		v, err := nums(3, 1)
		if err != nil {
			return rec, err
		}
		rec.N, rec.Seq, rec.Cont = v[0], v[1], int(v[2])-1
	case RecIntent, RecAck:
		if len(f) < 2 || (f[1] != "P" && f[1] != "D") {
			return rec, fmt.Errorf("record %q: bad op", s)
		}
		rec.Op = f[1][0]
		want := 2
		if rec.Kind == RecAck {
			if len(f) != 5 || (f[4] != "ok" && f[4] != "fail") {
				return rec, fmt.Errorf("record %q: bad ack", s)
			}
			rec.OK = f[4] == "ok"
			f = f[:4]
		}
		v, err := nums(want, 2)
		if err != nil {
			return rec, err
		}
		rec.Idx, rec.Ver = v[0], v[1]
	case RecCkStart, RecCkErr:
		v, err := nums(1, 1)
		if err != nil {
			return rec, err
		}
		rec.N = v[0]
	case RecCkDone:
		v, err := nums(2, 1)
		if err != nil {
			return rec, err
		}
		rec.N, rec.Seq = v[0], v[1]
	case RecClosed:
		if len(f) != 1 {
			return rec, fmt.Errorf("record %q: want 1 field", s)
		}
	case RecWrong, RecUnload:
		v, err := nums(2, 1)
		if err != nil {
			return rec, err
		}
		rec.Idx, rec.Ver = v[0], v[1]
	case RecTorn:
		v, err := nums(2, 1)
		if err != nil {
			return rec, err
		}
		rec.N, rec.Seq = v[0], v[1] // offset, length
	default:
		return rec, fmt.Errorf("unknown record %q", s)
	}
	return rec, nil
}
