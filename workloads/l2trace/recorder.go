package l2trace

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/blake2b"
)

// Options configure a Recorder.
type Options struct {
	// Path is the first file; rotation n writes Path.n (Parts lists them).
	Path string
	// MaxBytes starts a new file once one reaches it (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxFiles keeps at most this many files, deleting the oldest part (0: all).
	MaxFiles int
	// Buffer is how many records wait for the writer; a record that finds it full is dropped
	// and counted (0: DefaultBuffer).
	Buffer int
	// Redact writes tenants (cache_salt), models and clients as keyed BLAKE2b-256 hashes
	// (the first 16 bytes, hex). RedactKey is the key (at most 64 bytes); without one a
	// random key is drawn per Recorder, so two recordings' hashes cannot be linked — give
	// the same key to recordings meant to be merged.
	Redact    bool
	RedactKey []byte
	// FlushEvery writes buffered lines out at least this often (0: 100 ms).
	FlushEvery time.Duration
}

// Defaults of Options.
const (
	DefaultMaxBytes = 256 << 20
	DefaultBuffer   = 1 << 16
)

// Stats is what a Recorder has done so far.
type Stats struct {
	Records int64 // written
	Dropped int64 // lost to a full buffer, a closed recorder or a failed write
	Files   int   // files started
}

// Recorder writes Records to size-bounded JSON-lines files from a background goroutine.
// Record never blocks; a nil *Recorder records nothing, so a node can call it
// unconditionally.
type Recorder struct {
	o       Options
	h       Header
	ch      chan Record
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	dropped atomic.Int64
	records atomic.Int64
	files   atomic.Int64
	mac     []byte // BLAKE2b key when redacting
	once    sync.Once
	err     error // the writer's first error; read after done
}

// New creates o.Path (truncating it), writes h as its header and starts the writer. h's
// Kind, Schema, FormatVersion, Part, StartUnixUs (when zero) and Redacted are filled in.
func New(o Options, h Header) (*Recorder, error) {
	if o.Path == "" {
		return nil, errors.New("l2trace: a recorder needs a path")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = 100 * time.Millisecond
	}
	r := &Recorder{o: o, ch: make(chan Record, o.Buffer), stop: make(chan struct{}), done: make(chan struct{})}
	if o.Redact {
		if len(o.RedactKey) > blake2b.Size {
			return nil, fmt.Errorf("l2trace: a redaction key of %d bytes is longer than BLAKE2b's %d", len(o.RedactKey), blake2b.Size)
		}
		r.mac = o.RedactKey
		if len(r.mac) == 0 {
			r.mac = make([]byte, 32)
			if _, err := rand.Read(r.mac); err != nil {
				return nil, err
			}
		}
		h.Redacted = "blake2b-256-keyed"
	}
	h.Kind, h.Schema, h.FormatVersion, h.Part = "header", Schema, FormatVersion, 0
	if h.StartUnixUs == 0 {
		h.StartUnixUs = time.Now().UnixMicro()
	}
	r.h = h
	w, err := r.open(0)
	if err != nil {
		return nil, err
	}
	go r.write(w)
	return r, nil
}

// Record queues rec for the writer and reports whether it was taken; a full buffer (or a
// closed recorder) drops it and counts it.
func (r *Recorder) Record(rec Record) bool {
	if r == nil {
		return false
	}
	if r.closed.Load() {
		r.dropped.Add(1)
		return false
	}
	select {
	case r.ch <- rec:
		return true
	default:
		r.dropped.Add(1)
		return false
	}
}

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	if r == nil {
		return Stats{}
	}
	return Stats{Records: r.records.Load(), Dropped: r.dropped.Load(), Files: int(r.files.Load())}
}

// Close writes what is queued, ends the file with its footer and returns the writer's first
// error. Records given after Close are dropped.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
	})
	<-r.done
	return r.err
}

// file is the open part being written.
type file struct {
	f        *os.File
	bw       *bufio.Writer
	part     int
	bytes    int64
	records  int64
	dropped0 int64 // r.dropped when the part began
}

// partPath is the path of rotation n.
func partPath(path string, n int) string {
	if n == 0 {
		return path
	}
	return path + "." + strconv.Itoa(n)
}

func (r *Recorder) open(part int) (*file, error) {
	f, err := os.Create(partPath(r.o.Path, part))
	if err != nil {
		return nil, err
	}
	w := &file{f: f, bw: bufio.NewWriterSize(f, 1<<16), part: part, dropped0: r.dropped.Load()}
	h := r.h
	h.Part = part
	b, _ := json.Marshal(h)
	n, err := w.bw.Write(append(b, '\n'))
	w.bytes += int64(n)
	r.files.Add(1)
	if part >= r.o.MaxFiles && r.o.MaxFiles > 0 {
		os.Remove(partPath(r.o.Path, part-r.o.MaxFiles))
	}
	return w, err
}

// finish ends w with its footer and closes it.
func (r *Recorder) finish(w *file) error {
	b, _ := json.Marshal(Footer{Kind: "footer", Records: w.records, Dropped: r.dropped.Load() - w.dropped0})
	_, err := w.bw.Write(append(b, '\n'))
	err = errors.Join(err, w.bw.Flush(), w.f.Close())
	return err
}

// write is the background writer: one line per record, a flush every FlushEvery, a new
// part past MaxBytes.
func (r *Recorder) write(w *file) {
	defer close(r.done)
	tick := time.NewTicker(r.o.FlushEvery)
	defer tick.Stop()
	var line []byte
	fail := func(err error) {
		if err != nil && r.err == nil {
			r.err = err
		}
	}
	put := func(rec *Record) {
		if w == nil {
			r.dropped.Add(1)
			return
		}
		line = r.appendRecord(line[:0], rec)
		n, err := w.bw.Write(line)
		if err != nil {
			fail(err)
			r.dropped.Add(1)
			return
		}
		w.bytes += int64(n)
		w.records++
		r.records.Add(1)
		if w.bytes >= r.o.MaxBytes {
			fail(r.finish(w))
			nw, err := r.open(w.part + 1)
			fail(err)
			if err != nil {
				nw = nil
			}
			w = nw
		}
	}
	for {
		select {
		case rec := <-r.ch:
			put(&rec)
		case <-tick.C:
			if w != nil {
				fail(w.bw.Flush())
			}
		case <-r.stop:
		drain:
			for {
				select {
				case rec := <-r.ch:
					put(&rec)
				default:
					break drain
				}
			}
			if w != nil {
				fail(r.finish(w))
			}
			return
		}
	}
}

// redact is s as the recording writes it: its keyed hash when redacting ("" stays "").
func (r *Recorder) redact(s string) string {
	if r.mac == nil || s == "" {
		return s
	}
	h, _ := blake2b.New256(r.mac)
	h.Write([]byte(s))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// appendRecord appends rec's JSON line (docs/record.md, "Records").
func (r *Recorder) appendRecord(b []byte, rec *Record) []byte {
	b = append(b, `{"ts_us":`...)
	b = strconv.AppendInt(b, rec.Time.UnixMicro(), 10)
	b = append(b, `,"op":`...)
	b = appendString(b, string(rec.Op))
	if rec.Client != "" {
		b = append(b, `,"client":`...)
		b = appendString(b, r.redact(rec.Client))
	}
	if rec.Proto != "" {
		b = append(b, `,"proto":`...)
		b = appendString(b, rec.Proto)
	}
	b = append(b, `,"cache_salt":`...)
	b = appendString(b, r.redact(rec.Salt))
	b = append(b, `,"model_name":`...)
	b = appendString(b, r.redact(rec.Model))
	b = append(b, `,"kv_rank":`...)
	b = strconv.AppendInt(b, int64(rec.KVRank), 10)
	b = append(b, `,"chunk_hash":`...)
	b = appendString(b, rec.Chunk)
	b = append(b, `,"object_size":`...)
	b = strconv.AppendInt(b, rec.Size, 10)
	b = append(b, `,"hit":`...)
	b = strconv.AppendBool(b, rec.Hit)
	b = append(b, `,"latency_us":`...)
	b = strconv.AppendInt(b, rec.Latency.Microseconds(), 10)
	if rec.Batch != 0 {
		b = append(b, `,"batch":`...)
		b = strconv.AppendUint(b, rec.Batch, 10)
	}
	if rec.Err != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, rec.Err)
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
