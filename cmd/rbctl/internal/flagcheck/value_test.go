package flagcheck

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestSizeVarAndAliases(t *testing.T) {
	var ru, region int64
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	SizeVar(fs, &ru, "ru", "auto", "", "auto")
	SizeVar(fs, &region, "region", "16M", "")
	Alias(fs, "old-region", "region")
	Alias(fs, "unit", "ru") // a second alias keeps the first
	var legacy bool
	Alias(fs, "legacy", "new")
	fs.BoolVar(&legacy, "new", false, "") // an alias given before its flag
	if ru != 0 || region != 16<<20 {
		t.Fatalf("defaults: ru %d, region %d", ru, region)
	}
	if err := fs.Parse([]string{"--unit", "64K", "--old-region", "1M", "--legacy"}); err != nil {
		t.Fatal(err)
	}
	if ru != 64<<10 || region != 1<<20 || !legacy || fs.Lookup("ru").Value.Type() != "string" || fs.Lookup("ru").Value.String() != "64K" {
		t.Errorf("parsed: ru %d, region %d", ru, region)
	}
	for _, bad := range []string{"0", "-1M", "lots"} {
		if err := fs.Set("region", bad); err == nil {
			t.Errorf("--region %s accepted", bad)
		}
	}
}
