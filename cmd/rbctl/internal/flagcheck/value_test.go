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
	fs.SetNormalizeFunc(Aliases(map[string]string{"old-region": "region"}))
	if ru != 0 || region != 16<<20 {
		t.Fatalf("defaults: ru %d, region %d", ru, region)
	}
	if err := fs.Parse([]string{"--ru", "64K", "--old-region", "1M"}); err != nil {
		t.Fatal(err)
	}
	if ru != 64<<10 || region != 1<<20 || fs.Lookup("ru").Value.Type() != "string" || fs.Lookup("ru").Value.String() != "64K" {
		t.Errorf("parsed: ru %d, region %d", ru, region)
	}
	for _, bad := range []string{"0", "-1M", "lots"} {
		if err := fs.Set("region", bad); err == nil {
			t.Errorf("--region %s accepted", bad)
		}
	}
}
