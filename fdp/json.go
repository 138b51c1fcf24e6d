package fdp

// The JSON shapes of nvme-cli's fdp plugin (nvme-print-json.c, v2.x): the field names and
// nesting `nvme fdp ... -o json` prints, so rbctl's output can be diffed against it. Change
// nothing here without checking nvme-cli: tests and docs/fdp.md compare against these names.
type (
	// ConfigsJSON is `nvme fdp configs -o json`.
	ConfigsJSON struct {
		N       uint16       `json:"n"`
		Configs []ConfigJSON `json:"configs"`
	}
	// ConfigJSON is one configuration descriptor.
	ConfigJSON struct {
		FDPA  uint8     `json:"fdpa"`
		VSS   uint8     `json:"vss"`
		NRG   uint32    `json:"nrg"`
		NRUH  uint16    `json:"nruh"`
		NNSS  uint32    `json:"nnss"`
		RUNS  uint64    `json:"runs"`
		ERUTL uint32    `json:"erutl"`
		RUHs  []RUHJSON `json:"ruhs"` // nvme-cli builds this array but does not attach it (v2.16)
	}
	// RUHJSON is one reclaim unit handle of a configuration.
	RUHJSON struct {
		RUHT uint8 `json:"ruht"`
	}
	// UsageJSON is `nvme fdp usage -o json`.
	UsageJSON struct {
		NRUH  int            `json:"nruh"`
		RUHUs []RUHUsageJSON `json:"ruhus"`
	}
	// RUHUsageJSON is one RUH usage descriptor.
	RUHUsageJSON struct {
		RUHA uint8 `json:"ruha"`
	}
	// StatusJSON is `nvme fdp status -o json`.
	StatusJSON struct {
		NRUHSD int             `json:"nruhsd"`
		RUHSs  []RUHStatusDesc `json:"ruhss"`
	}
	// EventsJSON is `nvme fdp events -o json`.
	EventsJSON struct {
		N      int         `json:"n"`
		Events []EventJSON `json:"events"`
	}
	// EventJSON is one event; the optional fields are there only when the event carries them.
	EventJSON struct {
		Type      uint8   `json:"type"`
		FDPEF     uint8   `json:"fdpef"`
		PID       uint16  `json:"pid"`
		Timestamp uint64  `json:"timestamp"`
		NSID      uint32  `json:"nsid"`
		NLBAM     *uint16 `json:"nlbam,omitempty"`
		LBA       *uint64 `json:"lba,omitempty"`
		RGID      *uint16 `json:"rgid,omitempty"`
		RUHID     *uint8  `json:"ruhid,omitempty"`
	}
)

// JSON is the log in nvme-cli's shape.
func (l *ConfigLog) JSON() ConfigsJSON {
	j := ConfigsJSON{N: uint16(len(l.Configs) - 1)}
	for _, c := range l.Configs {
		cj := ConfigJSON{FDPA: c.FDPA, VSS: c.VSS, NRG: c.NRG, NRUH: c.NRUH, NNSS: c.NNSS, RUNS: c.RUNS, ERUTL: c.ERUTL, RUHs: []RUHJSON{}}
		for _, r := range c.RUHs {
			cj.RUHs = append(cj.RUHs, RUHJSON{RUHT: uint8(r)})
		}
		j.Configs = append(j.Configs, cj)
	}
	return j
}

// JSON is the log in nvme-cli's shape.
func (l *UsageLog) JSON() UsageJSON {
	j := UsageJSON{NRUH: len(l.Attrs), RUHUs: []RUHUsageJSON{}}
	for _, a := range l.Attrs {
		j.RUHUs = append(j.RUHUs, RUHUsageJSON{RUHA: uint8(a)})
	}
	return j
}

// JSON is the RUH status in nvme-cli's shape.
func (s *RUHStatus) JSON() StatusJSON {
	return StatusJSON{NRUHSD: len(s.Descs), RUHSs: append([]RUHStatusDesc{}, s.Descs...)}
}

// JSON is the log in nvme-cli's shape.
func (l *EventsLog) JSON() EventsJSON {
	j := EventsJSON{N: len(l.Events), Events: []EventJSON{}}
	for _, e := range l.Events {
		ej := EventJSON{Type: uint8(e.Type), FDPEF: e.Flags, PID: e.PID, Timestamp: e.Timestamp, NSID: e.NSID}
		if e.Type == EventMediaReallocated {
			nlbam, lba := e.NLBAM, e.LBA
			ej.NLBAM, ej.LBA = &nlbam, &lba
		}
		if e.Flags&EventFlagLV != 0 {
			rg, ruh := e.RGID, e.RUHID
			ej.RGID, ej.RUHID = &rg, &ruh
		}
		j.Events = append(j.Events, ej)
	}
	return j
}
