package lmcache

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// TestRunNames: a config's run is named for its data policy ("lmcache:none" without FDP),
// and only such names are taken for one.
func TestRunNames(t *testing.T) {
	for _, c := range []struct{ extra, name string }{
		{``, "lmcache:none"},
		{`,"fdp_enabled":true`, "lmcache:cache_salt_prefix"},
		{`,"fdp_enabled":true,"fdp_data_placement_policy":"CACHE_SALT_RANK"`, "lmcache:cache_salt_rank"},
		{`,"fdp_enabled":true,"fdp_data_placement_policy":"none"`, "lmcache:none"},
	} {
		f := fdpConfig(t, c.extra)
		if got := f.RunName(); got != c.name || !IsRun(got) {
			t.Errorf("%s: run %q (IsRun %v), want %q", c.extra, got, IsRun(got), c.name)
		}
	}
	for _, p := range []string{"none", "cache_salt_prefix", "lmcache", "tenant:lmcache:x"} {
		if IsRun(p) {
			t.Errorf("IsRun(%q)", p)
		}
	}
}

// TestSummary: the notes list the settings after LMCache's defaulting.
func TestSummary(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{`,"fdp_enabled":true`, "fdp_enabled true, fdp_data_placement_policy cache_salt_prefix, fdp_placement_ids every non-zero identifier but the metadata one, " +
			"meta_checkpoint_placement_id none, fdp_slot_reuse_policy pid_affinity"},
		{`,"fdp_enabled":true,"fdp_placement_ids":[4,2],"meta_checkpoint_placement_id":9,"fdp_slot_reuse_policy":"none"`,
			"fdp_enabled true, fdp_data_placement_policy cache_salt_prefix, fdp_placement_ids [4, 2], meta_checkpoint_placement_id 9, fdp_slot_reuse_policy none"},
		{``, "fdp_enabled false, fdp_data_placement_policy none, fdp_placement_ids every non-zero identifier but the metadata one, " +
			"meta_checkpoint_placement_id none, fdp_slot_reuse_policy none"},
	} {
		if got := fdpConfig(t, c.extra).Summary(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.extra, got, c.want)
		}
	}
}

// TestRunPolicy: on a model whose handle i has identifier i, the run puts each bucket on
// the next configured identifier's handle and checkpoints on the metadata one, labels
// both, and is named as given; without a data policy it places no data but still the
// checkpoints.
func TestRunPolicy(t *testing.T) {
	if got := HandlePIDs(4); !slices.Equal(got, []uint16{0, 1, 2, 3}) {
		t.Fatalf("HandlePIDs(4) = %v", got)
	}
	f := fdpConfig(t, `,"fdp_enabled":true,"fdp_placement_ids":[5,3],"meta_checkpoint_placement_id":7`)
	p, err := f.Resolve(HandlePIDs(8), 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := p.RunPolicy(f.RunName())
	got := []placement.Handle{
		pol.Place(placement.Write{CacheSalt: "rag:a"}),
		pol.Place(placement.Write{CacheSalt: "chat:b"}),
		pol.Place(placement.Write{CacheSalt: "RAG:c"}),
		pol.Place(placement.Write{CacheSalt: "plain"}),
		pol.Place(placement.Write{Metadata: true}),
	}
	if want := []placement.Handle{5, 3, 5, placement.None, 7}; !slices.Equal(got, want) {
		t.Fatalf("placed on %v, want %v", got, want)
	}
	if pol.Name() != "lmcache:cache_salt_prefix" {
		t.Errorf("name %q", pol.Name())
	}
	labels := placement.Labels(pol)
	if labels[7] != "metadata" || !strings.Contains(labels[5], "rag") || !strings.Contains(labels[3], "chat") {
		t.Errorf("labels %v", labels)
	}

	f = fdpConfig(t, `,"fdp_enabled":true,"fdp_data_placement_policy":"none","meta_checkpoint_placement_id":2`)
	if p, err = f.Resolve(HandlePIDs(4), 0); err != nil {
		t.Fatal(err)
	}
	if p.Policy != nil || p.Data() == nil || p.Data().Place(placement.Write{CacheSalt: "rag:a"}) != placement.None {
		t.Fatalf("policy none: Policy %v, Data %v", p.Policy, p.Data())
	}
	pol = p.RunPolicy("x")
	if h := pol.Place(placement.Write{Metadata: true}); h != 2 {
		t.Errorf("checkpoint on %d, want 2", h)
	}
	if labels := placement.Labels(pol); len(labels) != 1 || labels[2] != "metadata" {
		t.Errorf("labels %v", labels)
	}
}

// TestLoadFile: a file's config, warnings and path; a refused one names the path and
// wraps ErrConfig; notes list the run, then the warnings.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{`+fdpBase+`,"fdp_enabled":true,"surprise":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{`+fdpBase+`,"fdp_enabled":"yes"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != good || f.Config.Devices[0].Path != "/dev/ng0n1" || len(f.Warnings) != 1 || f.RunName() != "lmcache:cache_salt_prefix" {
		t.Fatalf("loaded %+v", f)
	}
	notes := f.Notes("what it took")
	if want := []string{"lmcache:cache_salt_prefix is what it took", "LMCache config: surprise: unknown raw-block key; ignored"}; !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	if _, err := LoadFile(bad); err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("bad file: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
