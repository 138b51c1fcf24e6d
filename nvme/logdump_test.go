package nvme

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLogDump(t *testing.T) {
	d := LogDump{Page: LogPage{LID: 0x22, LSI: 1, NSID: NSIDAll}, Data: []byte{0xde, 0xad, 0xbe, 0xef}}
	var b strings.Builder
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "log 0x22 lsp 0 lsi 1 offset 0 nsid 0xffffffff: 4 bytes\n00000000  de ad be ef"; !strings.HasPrefix(b.String(), want) || strings.HasSuffix(b.String(), "\n\n") {
		t.Errorf("text:\n%q\nwant prefix %q, one trailing newline", b.String(), want)
	}
	js, err := json.Marshal(d.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":"deadbeef","length":4,"lid":34,"lsi":1,"lsp":0,"nsid":4294967295,"offset":0}`; string(js) != want {
		t.Errorf("json %s, want %s", js, want)
	}
}
