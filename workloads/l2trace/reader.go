package l2trace

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Recording is one or more recording files read and merged by time.
type Recording struct {
	// Nodes has the header of each recording node (by Header.Node, in order of first
	// appearance); rotated parts of one recording add none.
	Nodes   []Header
	Records []Record // by Time; records of equal time keep their file order
	Dropped int64    // records the recorders lost (the footers' sum)
	Files   []string // the files read, rotated parts included
}

// Capacity is the recorded cache's: the sum of the nodes' slots, the largest slot size.
func (r *Recording) Capacity() Capacity {
	var c Capacity
	for _, h := range r.Nodes {
		c.Slots += h.Capacity.Slots
		c.SlotBytes = max(c.SlotBytes, h.Capacity.SlotBytes)
	}
	return c
}

// wireRecord is a record line (docs/record.md).
type wireRecord struct {
	TsUs      *int64  `json:"ts_us"`
	Op        Op      `json:"op"`
	Client    string  `json:"client"`
	Proto     string  `json:"proto"`
	CacheSalt string  `json:"cache_salt"`
	ModelName string  `json:"model_name"`
	KVRank    int     `json:"kv_rank"`
	ChunkHash *string `json:"chunk_hash"`
	Size      int64   `json:"object_size"`
	Hit       bool    `json:"hit"`
	LatencyUs int64   `json:"latency_us"`
	Batch     uint64  `json:"batch"`
	Error     string  `json:"error"`
}

// Read reads one recording file: its header, its records in file order, and the records
// its footer says were dropped. A line that is not a record of this format is an error
// naming it (ErrRecording); a file cut short (no footer: the node stopped) is not.
func Read(rd io.Reader) (Header, []Record, int64, error) {
	br := bufio.NewReaderSize(rd, 1<<16)
	var h Header
	var recs []Record
	var dropped int64
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return h, nil, 0, err
		}
		b = bytes.TrimSpace(b)
		if len(b) > 0 {
			if line == 1 {
				if h, err = readHeader(b); err != nil {
					return h, nil, 0, err
				}
			} else if bytes.Contains(b, []byte(`"kind":"footer"`)) {
				var f Footer
				if err := json.Unmarshal(b, &f); err != nil {
					return h, nil, 0, fmt.Errorf("%w: line %d: %v", ErrRecording, line, err)
				}
				dropped += f.Dropped
			} else {
				rec, err := readRecord(b)
				if err != nil {
					return h, nil, 0, fmt.Errorf("%w: line %d: %v", ErrRecording, line, err)
				}
				recs = append(recs, rec)
			}
		} else if line == 1 && err == io.EOF {
			return h, nil, 0, fmt.Errorf("%w: empty file", ErrRecording)
		}
		if err == io.EOF {
			return h, recs, dropped, nil
		}
	}
}

func readHeader(b []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(b, &h); err != nil || h.Kind != "header" || h.Schema != Schema {
		return h, fmt.Errorf("%w: %w: the first line is not a %s header", ErrRecording, ErrHeader, Schema)
	}
	if h.FormatVersion != FormatVersion {
		return h, fmt.Errorf("%w: %w: version %d (this build reads %d)", ErrRecording, ErrVersion, h.FormatVersion, FormatVersion)
	}
	if h.Capacity.Slots < 0 || h.Capacity.SlotBytes < 0 {
		return h, fmt.Errorf("%w: %w: capacity %+v", ErrRecording, ErrHeader, h.Capacity)
	}
	return h, nil
}

func readRecord(b []byte) (Record, error) {
	var w wireRecord
	if err := json.Unmarshal(b, &w); err != nil {
		return Record{}, err
	}
	switch {
	case w.TsUs == nil:
		return Record{}, errors.New("no ts_us")
	case !w.Op.Valid():
		return Record{}, fmt.Errorf("op %q is not get, set, exists, delete or fetch", w.Op)
	case w.ChunkHash == nil:
		return Record{}, errors.New("no chunk_hash")
	case w.Size < 0 || w.LatencyUs < 0:
		return Record{}, fmt.Errorf("negative object_size %d or latency_us %d", w.Size, w.LatencyUs)
	}
	return Record{Time: time.UnixMicro(*w.TsUs), Op: w.Op, Client: w.Client, Proto: w.Proto, Salt: w.CacheSalt, Model: w.ModelName,
		KVRank: w.KVRank, Chunk: *w.ChunkHash, Size: w.Size, Hit: w.Hit, Latency: time.Duration(w.LatencyUs) * time.Microsecond,
		Batch: w.Batch, Err: w.Error}, nil
}

// Parts lists path and the rotations a Recorder wrote after it (path.1, path.2, …) that
// exist, in order; the first missing one ends the list. With MaxFiles the oldest parts are
// gone: the list then starts at the oldest kept.
func Parts(path string) []string {
	var out []string
	missing := 0
	for n := 0; missing < 64; n++ {
		p := partPath(path, n)
		if _, err := os.Stat(p); err != nil {
			if len(out) > 0 {
				break
			}
			missing++ // rotated away: look further
			continue
		}
		out = append(out, p)
	}
	return out
}

// ReadFiles reads each path with its rotated parts and merges every record by time. Files
// of one node (same Header.Node and StartUnixUs) are one recording.
func ReadFiles(paths ...string) (*Recording, error) {
	r := &Recording{}
	type nodeID struct {
		node  string
		start int64
	}
	seen := map[nodeID]bool{}
	for _, path := range paths {
		parts := Parts(path)
		if len(parts) == 0 {
			return nil, fmt.Errorf("%s: %w", path, os.ErrNotExist)
		}
		for _, p := range parts {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			h, recs, dropped, err := Read(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if id := (nodeID{h.Node, h.StartUnixUs}); !seen[id] {
				seen[id] = true
				r.Nodes = append(r.Nodes, h)
			}
			r.Records = append(r.Records, recs...)
			r.Dropped += dropped
			r.Files = append(r.Files, p)
		}
	}
	slices.SortStableFunc(r.Records, func(a, b Record) int { return cmp.Compare(a.Time.UnixMicro(), b.Time.UnixMicro()) })
	return r, nil
}
