package workloads

import (
	"fmt"

	"github.com/rbctl/rbctl/admission"
)

// Admission decides which missed chunks a request stores: a policy of package admission
// (docs/bench.md, "Admission"). The Driver asks it for every chunk of a request's tail that
// the cache does not hold, in prompt order, and stores the leading run it admits: a chunk
// after a refused one could never be reached by a prefix lookup, so it is not written either
// (it is still shown to the policy, which may keep state about it). Puts (KindPut) are
// always stored. An Admission is used by one Driver, under its lock.
type Admission = admission.Policy

// Admission specs (admission.All, ...).
const (
	AdmitAll       = admission.All
	AdmitSecondHit = admission.SecondHit
	AdmitTinyLFU   = admission.TinyLFU
	AdmitDepth     = admission.Depth
)

// CheckAdmission refuses a malformed admission spec (admission.Check) as an ErrSpec.
func CheckAdmission(spec string) error {
	if err := admission.Check(spec); err != nil {
		return fmt.Errorf("%w: %w", ErrSpec, err)
	}
	return nil
}

// NewAdmission builds the policy of spec for a cache that keeps target chunks (admission.New);
// nil for all.
func NewAdmission(spec string, target int64) (Admission, error) {
	a, err := admission.New(spec, target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	return a, nil
}

// admKey is k as an admission policy sees it.
func admKey(k Key) admission.Key { return admission.Key{Hash: k.Hash, Group: k.Tenant} }

// admitter returns the admission test of a request's missed keys (keys[i] at index pos+i
// of the request), or nil when every miss is stored (no policy, or a put). It shows each
// chunk the cache does not hold to the policy with the entry its store would evict (the
// class's least recent unpinned entries, in order) and admits the leading run the policy
// accepts (lock held).
func (d *Driver) admitter(keys []Key, pos int) func(i int, k Key) bool {
	if d.adm == nil || pos < 0 || len(keys) == 0 {
		return nil
	}
	r := d.res
	c := r.class(keys[0].Tenant)
	cur := r.lrus[c].tail
	refused := false
	return func(i int, k Key) bool {
		if _, held := r.idx[k]; held {
			return !refused
		}
		var victim *admission.Key
		if r.held[c] >= r.limit[c] {
			for cur != nilIdx && (r.ents[cur].pins > 0 || r.ents[cur].pending) {
				cur = r.ents[cur].prev
			}
			if cur != nilIdx {
				v := admKey(r.ents[cur].key)
				victim = &v
			}
		}
		if ok := d.adm.Admit(admKey(k), pos+i, victim); !ok || refused {
			refused = true
			d.c.AdmissionRefused++
			return false
		}
		if victim != nil {
			cur = r.ents[cur].prev
		}
		return true
	}
}
