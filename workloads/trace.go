package workloads

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
)

// Trace formats. One op per line (JSONL) or row (CSV); the format is described in
// docs/bench.md ("Trace format"):
//
//	{"op":"request","salt":"chat","keys":["9f0c…","41aa…"],"size":65536}
//	{"op":"put","salt":"t0","key":"00000000000000ff","size":4096}
//
//	op,key,salt,size
//	request,9f0c…|41aa…,chat,65536
//
// op is request, lookup (a request that stores nothing), put, get or delete. A key is the
// chunk hash as up to 16 hex digits; any other string is hashed with FNV-1a 64.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// ErrTrace is wrapped by every trace decoding error.
var ErrTrace = errors.New("bad trace")

type traceLine struct {
	Op   string   `json:"op"`
	Key  string   `json:"key,omitempty"`
	Keys []string `json:"keys,omitempty"`
	Salt string   `json:"salt,omitempty"`
	Size int      `json:"size"`
}

// TraceWriter writes ops as a trace.
type TraceWriter struct {
	format string
	w      *bufio.Writer
	cw     *csv.Writer
	enc    *json.Encoder
}

// NewTraceWriter starts a trace in format (FormatJSONL or FormatCSV) on w.
func NewTraceWriter(w io.Writer, format string) (*TraceWriter, error) {
	tw := &TraceWriter{format: format, w: bufio.NewWriterSize(w, 1<<16)}
	switch format {
	case FormatJSONL:
		tw.enc = json.NewEncoder(tw.w)
	case FormatCSV:
		tw.cw = csv.NewWriter(tw.w)
		if err := tw.cw.Write([]string{"op", "key", "salt", "size"}); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown trace format %q (jsonl or csv)", format)
	}
	return tw, nil
}

func opName(op *Op) string {
	if op.Kind == KindRequest && op.ReadOnly {
		return "lookup"
	}
	return op.Kind.String()
}

func hexKey(h uint64) string { return fmt.Sprintf("%016x", h) }

// Write appends one op; salts resolves op.Tenant.
func (tw *TraceWriter) Write(op *Op, salts []string) error {
	salt := ""
	if int(op.Tenant) < len(salts) {
		salt = salts[op.Tenant]
	}
	keys := make([]string, len(op.Keys))
	for i, k := range op.Keys {
		keys[i] = hexKey(k.Hash)
	}
	if tw.cw != nil {
		return tw.cw.Write([]string{opName(op), strings.Join(keys, "|"), salt, strconv.Itoa(op.Size)})
	}
	l := traceLine{Op: opName(op), Salt: salt, Size: op.Size}
	if op.Kind == KindRequest {
		l.Keys = keys
	} else if len(keys) == 1 {
		l.Key = keys[0]
	} else {
		l.Keys = keys
	}
	return tw.enc.Encode(&l)
}

// Close flushes the trace.
func (tw *TraceWriter) Close() error {
	if tw.cw != nil {
		tw.cw.Flush()
		if err := tw.cw.Error(); err != nil {
			return err
		}
	}
	return tw.w.Flush()
}

// parseKey decodes a trace key: up to 16 hex digits, or any other string hashed.
func parseKey(s string) uint64 {
	if len(s) > 0 && len(s) <= 16 {
		if v, err := strconv.ParseUint(s, 16, 64); err == nil {
			return v
		}
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Trace is a trace loaded in memory; Replay turns it into a Generator.
type Trace struct {
	Ops   []Op
	salts []string
	max   int
}

// ReadTrace reads a whole trace in format from r.
func ReadTrace(r io.Reader, format string) (*Trace, error) {
	t := &Trace{}
	saltIdx := map[string]int32{}
	add := func(line int, name string, keys []string, salt string, size int) error {
		kind, ro := KindRequest, false
		if name == "lookup" {
			ro = true
		} else {
			k, err := ParseKind(name)
			if err != nil {
				return fmt.Errorf("%w: line %d: %v", ErrTrace, line, err)
			}
			kind = k
		}
		if size <= 0 {
			return fmt.Errorf("%w: line %d: size %d must be positive", ErrTrace, line, size)
		}
		if len(keys) == 0 {
			return fmt.Errorf("%w: line %d: no key", ErrTrace, line)
		}
		ti, ok := saltIdx[salt]
		if !ok {
			ti = int32(len(t.salts))
			saltIdx[salt] = ti
			t.salts = append(t.salts, salt)
		}
		op := Op{Kind: kind, Tenant: ti, Size: size, ReadOnly: ro, Keys: make([]Key, len(keys))}
		for i, k := range keys {
			op.Keys[i] = Key{Hash: parseKey(k), Tenant: ti}
		}
		t.max = max(t.max, size)
		t.Ops = append(t.Ops, op)
		return nil
	}
	switch format {
	case FormatJSONL:
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 64<<20)
		for line := 1; sc.Scan(); line++ {
			b := sc.Bytes()
			if len(strings.TrimSpace(string(b))) == 0 {
				continue
			}
			var l traceLine
			if err := json.Unmarshal(b, &l); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, line, err)
			}
			keys := l.Keys
			if l.Key != "" {
				keys = append([]string{l.Key}, keys...)
			}
			if err := add(line, l.Op, keys, l.Salt, l.Size); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTrace, err)
		}
	case FormatCSV:
		cr := csv.NewReader(r)
		cr.FieldsPerRecord = 4
		for line := 1; ; line++ {
			rec, err := cr.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrTrace, err)
			}
			if line == 1 && rec[0] == "op" {
				continue
			}
			size, err := strconv.Atoi(rec[3])
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: size %q", ErrTrace, line, rec[3])
			}
			var keys []string
			if rec[1] != "" {
				keys = strings.Split(rec[1], "|")
			}
			if err := add(line, rec[0], keys, rec[2], size); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown trace format %q (jsonl or csv)", format)
	}
	if len(t.Ops) == 0 { // nothing to replay, and no chunk size to size buffers by
		return nil, fmt.Errorf("%w: no requests", ErrTrace)
	}
	return t, nil
}

// FormatOf guesses a trace format from a file name.
func FormatOf(path string) string {
	if strings.HasSuffix(path, ".csv") {
		return FormatCSV
	}
	return FormatJSONL
}

// Replay returns a generator over the trace; loops > 1 replays it that many times.
func (t *Trace) Replay(loops int) Generator { return &replay{t: t, loops: max(loops, 1)} }

type replay struct {
	t        *Trace
	i, loops int
}

func (r *replay) Salts() []string { return r.t.salts }
func (r *replay) ChunkBytes() int { return r.t.max }
func (r *replay) Next(op *Op) bool {
	if len(r.t.Ops) == 0 || r.i >= len(r.t.Ops)*r.loops {
		return false
	}
	*op = r.t.Ops[r.i%len(r.t.Ops)]
	r.i++
	return true
}
