package workloads

import (
	"fmt"
	"math"

	"github.com/rbctl/rbctl/placement"
)

// Per-tenant slot budgets (DriverConfig.Budgets, placement.Budgets): the budgets divide the
// slots the cache keeps in use, its target (TargetSlots). A tenant with a budget holds at
// most that many entries and, when a store would take it over, evicts its own least recent
// ones (its own regions under region eviction), never another tenant's; the tenants without
// a budget share what the budgets leave (placement.Allocation.Shared) and evict among
// themselves. Entries a running request has locked, or whose store is in flight, are not
// evicted, so a tenant can be over its budget while more of its stores are in flight than
// the budget has room for (several workers). Without budgets the whole cache is one such
// class, limited to the target.

// TargetSlots is the resident-chunk limit a cache of slots slots keeps at utilisation util.
func TargetSlots(util float64, slots int64) int64 {
	return max(1, int64(math.Floor(util*float64(slots))))
}

// ResolveBudgets resolves budgets for the salts of a workload on a cache of slots slots of
// slotBytes each, kept at utilisation util: the budgets divide TargetSlots(util, slots).
func ResolveBudgets(b placement.Budgets, salts []string, slots, slotBytes int64, util float64) (placement.Allocation, error) {
	target := TargetSlots(util, slots)
	a, err := b.Resolve(salts, target, slotBytes)
	if err != nil {
		return a, fmt.Errorf("%w (budgets divide the %d slots the cache keeps in use: utilisation %g of its %d)", err, target, util, slots)
	}
	return a, nil
}

// checkRegionBudgets refuses regions of more than half a tenant's budget (or of the shared
// rest): evicting one would all but empty it.
func checkRegionBudgets(regionSlots float64, a placement.Allocation, salts []string) error {
	if regionSlots <= 0 {
		return nil
	}
	for i, s := range salts {
		if n, own := a.Limit(i); own && regionSlots > float64(n)/2 {
			return fmt.Errorf("%w: %.1f chunks is more than half tenant %q's budget of %d slots: evicting one would empty it", ErrRegionTooLarge, regionSlots, s, n)
		}
	}
	if a.Shared > 0 && regionSlots > float64(a.Shared)/2 {
		return fmt.Errorf("%w: %.1f chunks is more than half the %d slots the tenants without a budget share", ErrRegionTooLarge, regionSlots, a.Shared)
	}
	return nil
}

// CheckBudgets refuses s.Budgets for src's tenants on a cache of slots slots of slotBytes
// at utilisation util, the check NewDriver makes, so a front end can make it before it
// touches a device.
func (s Spec) CheckBudgets(src *Source, slots, slotBytes int64, util float64) error {
	if len(s.Budgets) == 0 {
		return nil
	}
	_, err := ResolveBudgets(s.Budgets, src.Salts, slots, slotBytes, util)
	return err
}

// evict makes room for the entries an op just reserved: each class its keys belong to evicts
// its least recent entries (or regions) until it is within its limit or nothing more can
// go. It appends the victims to out and returns it (lock held).
func (d *Driver) evict(keys []Key, out []Key) []Key {
	last := int32(-1)
	for _, k := range keys {
		c := d.res.class(k.Tenant)
		if c == last {
			continue
		}
		last = c
		for d.res.held[c] > d.res.limit[c] {
			before := len(out)
			if d.cfg.RegionSlots > 0 {
				out, _ = d.res.victimRegion(c, out)
			} else if v, found := d.res.victim(c); found {
				out = append(out, v)
			}
			if len(out) == before {
				break
			}
			for _, v := range out[before:] {
				d.c.Evicted++
				if v.Tenant >= 0 && int(v.Tenant) < len(d.c.TenantEvicted) {
					d.c.TenantEvicted[v.Tenant]++
				}
			}
		}
	}
	return out
}
