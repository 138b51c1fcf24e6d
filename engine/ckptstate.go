package engine

import "fmt"

// ckptState is a decoded checkpoint of either format.
type ckptState struct {
	format      CheckpointFormat
	version     int64
	devicePath  string
	hasDevPath  bool
	capacity    int64
	blockAlign  int64
	headerBytes int64
	slotBytes   int64
	metaTotal   int64
	metaMagic   string
	metaVersion int64
	dataBase    int64
	nextSlot    int64
	legacyNS    bool
	hasNS       bool
	seq         uint64 // compact v2: the seq the writer gave this checkpoint (CRC-covered)
	hasSeq      bool
	entries     []ckptEntry
}

type ckptEntry struct {
	key    string
	id     uint64
	hasID  bool
	offset int64
	size   int64
	crc    uint32
	hasCRC bool
	handle int16
	meta   *ObjMeta
}

// decodeCheckpoint decodes a container payload of either format, told apart by the compact
// magic or a leading JSON object.
func decodeCheckpoint(b []byte) (*ckptState, error) {
	if len(b) >= 8 && string(b[:8]) == compactMagic {
		return decodeCompact(b)
	}
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i < len(b) && b[i] == '{' {
		return decodeV1(b)
	}
	return nil, fmt.Errorf("%w: checkpoint payload is neither compact (%q) nor v1 JSON", ErrCorrupt, compactMagic)
}
