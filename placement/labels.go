package placement

import (
	"sort"
	"strconv"
	"strings"
)

// Labeler is implemented by policies that can say what each handle they used holds (for
// reports: which tenant's data a handle's WAF belongs to).
type Labeler interface {
	HandleLabels() map[int]string
}

// Labels returns p's handle labels, or nil when p cannot tell (stateless hashing, learning
// policies).
func Labels(p Policy) map[int]string {
	if l, ok := p.(Labeler); ok {
		return l.HandleLabels()
	}
	return nil
}

// maxLabelSalts is how many salts a handle label names before it summarises the rest.
const maxLabelSalts = 4

// saltLabel renders a salt for a label ("" is the untagged traffic).
func saltLabel(s string) string {
	if s == "" {
		return `"" (untagged)`
	}
	return s
}

// HandleLabels names the salts on each handle, as assigned so far.
func (p *cacheSaltAssign) HandleLabels() map[int]string {
	by := map[int][]string{}
	for salt, h := range p.Assignment() {
		by[h] = append(by[h], saltLabel(salt))
	}
	out := make(map[int]string, len(by))
	for h, ss := range by {
		sort.Strings(ss)
		if len(ss) > maxLabelSalts {
			ss = append(ss[:maxLabelSalts], "+"+strconv.Itoa(len(ss)-maxLabelSalts)+" more")
		}
		out[h] = "salt " + strings.Join(ss, ", ")
	}
	return out
}

// HandleLabels: static sends everything to its handle.
func (p staticP) HandleLabels() map[int]string { return map[int]string{p.h: "all data"} }

// HandleLabels: the metadata handle, then whatever the inner policy can say.
func (p *metadataClass) HandleLabels() map[int]string {
	out := map[int]string{}
	if p.inner == nil {
		out[0] = "all data"
	} else {
		for h, l := range Labels(p.inner) {
			out[h] = l
		}
	}
	out[p.meta] = "metadata"
	return out
}
