package engine

import (
	"fmt"
	"strconv"
)

// LMCache's v1 JSON checkpoint, written byte for byte as LMCache writes it, and its reader
// (jsonparse.go holds the bounded JSON parser).

// encodeV1 writes json.dumps(state, separators=(",",":"), ensure_ascii=True) for LMCache's
// state dict, keys in LMCache's order, entries in insertion order.
func (e *Engine) encodeV1(sn *snapshot) ([]byte, error) {
	b := make([]byte, 0, 256+len(sn.ents)*160)
	b = append(b, `{"version":1,"device_path":`...)
	b = appendJSONString(b, e.cfg.DevicePath)
	b = append(b, `,"capacity_bytes":`...)
	b = strconv.AppendInt(b, e.layout.Capacity, 10)
	b = append(b, `,"block_align":`...)
	b = strconv.AppendInt(b, int64(e.cfg.BlockAlign), 10)
	b = append(b, `,"header_bytes":`...)
	b = strconv.AppendInt(b, int64(e.cfg.HeaderBytes), 10)
	b = append(b, `,"slot_bytes":`...)
	b = strconv.AppendInt(b, e.cfg.SlotBytes, 10)
	b = append(b, `,"meta_total_bytes":`...)
	b = strconv.AppendInt(b, e.cfg.MetaTotalBytes, 10)
	b = append(b, `,"meta_magic":`...)
	b = appendJSONString(b, e.cfg.MetaMagic)
	b = append(b, `,"meta_version":`...)
	b = strconv.AppendInt(b, int64(e.cfg.MetaVersion), 10)
	b = append(b, `,"data_base_offset":`...)
	b = strconv.AppendInt(b, e.layout.DataBase, 10)
	b = append(b, `,"next_slot":`...)
	b = strconv.AppendInt(b, sn.nextSlot, 10)
	b = append(b, `,"entries":{`...)
	for i := range sn.ents {
		se := &sn.ents[i]
		k, ok := decodeKey(sn.keys[se.koff:se.koff+se.klen], sn.prefixes, sn.salts)
		if !ok {
			return nil, fmt.Errorf("%w: index key of slot %d does not decode", ErrCorrupt, se.slot)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, `:{"offset":`...)
		b = strconv.AppendInt(b, e.layout.DataBase+int64(se.slot)*e.cfg.SlotBytes, 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(se.size), 10)
		b = append(b, ',')
		b = appendMetaFields(b, se.meta)
		b = append(b, '}')
	}
	b = append(b, '}')
	if e.cfg.Namespace == NamespaceLegacy || len(sn.ents) == 0 {
		// LMCache's v1 state has no namespace, and an empty cache cannot be told legacy or
		// object by its keys. LMCache ignores unknown fields (its later v2 state uses this
		// name and these values), so object-namespace output with keys stays byte-exact.
		b = append(b, `,"key_namespace":`...)
		b = appendJSONString(b, string(e.cfg.Namespace))
	}
	b = append(b, '}')
	return b, nil
}

func appendMetaFields(b []byte, m *ObjMeta) []byte {
	if m == nil {
		return append(b, `"shape":null,"dtype":null,"fmt":null,"cached_positions":null`...)
	}
	b = append(b, `"shape":`...)
	b = appendIntList(b, m.Shape)
	b = append(b, `,"dtype":`...)
	b = appendOptString(b, m.Dtype)
	b = append(b, `,"fmt":`...)
	b = appendOptString(b, m.Fmt)
	b = append(b, `,"cached_positions":`...)
	return appendIntList(b, m.CachedPositions)
}

func appendMetaJSON(b []byte, m *ObjMeta) []byte {
	b = append(b, '{')
	b = appendMetaFields(b, m)
	return append(b, '}')
}

func appendIntList(b []byte, l []int) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, ']')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// appendJSONString encodes s as Python's json.dumps(ensure_ascii=True) does.
func appendJSONString(b []byte, s string) []byte {
	const hexl = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hexl[r>>12&15], hexl[r>>8&15], hexl[r>>4&15], hexl[r&15])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			r -= 0x10000
			b = u(b, 0xd800|(r>>10)&0x3ff)
			b = u(b, 0xdc00|r&0x3ff)
		default:
			b = u(b, r)
		}
	}
	return append(b, '"')
}

func decodeV1(b []byte) (*ckptState, error) {
	v, err := parseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%w: v1 JSON checkpoint: %v", ErrCorrupt, err)
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("%w: v1 checkpoint is not a JSON object", ErrCorrupt)
	}
	st := &ckptState{format: CheckpointLMCacheV1}
	getInt := func(name string, dst *int64, required bool) error {
		x, ok := obj.get(name)
		if !ok || x == nil {
			if required {
				return fmt.Errorf("%w: v1 checkpoint has no %q", ErrCorrupt, name)
			}
			return nil
		}
		n, ok := x.(jsonNumber)
		if !ok || !n.isInt {
			return fmt.Errorf("%w: v1 checkpoint field %q is not an integer", ErrCorrupt, name)
		}
		*dst = n.i
		return nil
	}
	if err := getInt("version", &st.version, true); err != nil {
		return nil, err
	}
	if st.version != 1 {
		return nil, fmt.Errorf("%w: checkpoint state version %d (only 1 is supported)", ErrBadVersion, st.version)
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"capacity_bytes", &st.capacity}, {"block_align", &st.blockAlign}, {"header_bytes", &st.headerBytes},
		{"slot_bytes", &st.slotBytes}, {"meta_total_bytes", &st.metaTotal}, {"meta_version", &st.metaVersion},
		{"data_base_offset", &st.dataBase}, {"next_slot", &st.nextSlot}} {
		if err := getInt(f.name, f.dst, f.name != "capacity_bytes" && f.name != "data_base_offset"); err != nil {
			return nil, err
		}
	}
	if x, ok := obj.get("device_path"); ok {
		if s, ok := x.(string); ok {
			st.devicePath, st.hasDevPath = s, true
		}
	}
	if x, ok := obj.get("meta_magic"); ok {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: meta_magic is not a string", ErrCorrupt)
		}
		st.metaMagic = s
	} else {
		return nil, fmt.Errorf("%w: v1 checkpoint has no \"meta_magic\"", ErrCorrupt)
	}
	if st.dataBase == 0 {
		st.dataBase = st.metaTotal
	}
	if x, ok := obj.get("key_namespace"); ok {
		if s, ok := x.(string); ok && (s == string(NamespaceLegacy) || s == string(NamespaceObject)) {
			st.hasNS, st.legacyNS = true, s == string(NamespaceLegacy)
		}
	}
	x, ok := obj.get("entries")
	if !ok {
		return nil, fmt.Errorf("%w: v1 checkpoint has no \"entries\"", ErrCorrupt)
	}
	ents, ok := x.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("%w: entries is not an object", ErrCorrupt)
	}
	st.entries = make([]ckptEntry, 0, len(ents.keys))
	for i, k := range ents.keys {
		eo, ok := ents.vals[i].(*jsonObject)
		if !ok {
			st.entries = append(st.entries, ckptEntry{key: k, offset: -1})
			continue
		}
		ce := ckptEntry{key: k, offset: -1, size: -1}
		if n, ok := eo.getNum("offset"); ok {
			ce.offset = n
		}
		if n, ok := eo.getNum("size"); ok {
			ce.size = n
		}
		ce.meta = metaFromJSON(eo)
		st.entries = append(st.entries, ce)
	}
	return st, nil
}

func metaFromJSON(v any) *ObjMeta {
	o, ok := v.(*jsonObject)
	if !ok {
		return nil
	}
	m := &ObjMeta{}
	any := false
	if l, ok := o.getIntList("shape"); ok {
		m.Shape, any = l, true
	}
	if l, ok := o.getIntList("cached_positions"); ok {
		m.CachedPositions, any = l, true
	}
	if x, ok := o.get("dtype"); ok {
		if s, ok := x.(string); ok {
			m.Dtype, any = s, true
		}
	}
	if x, ok := o.get("fmt"); ok {
		if s, ok := x.(string); ok {
			m.Fmt, any = s, true
		}
	}
	if !any {
		return nil
	}
	return m
}
