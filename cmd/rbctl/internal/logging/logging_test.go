package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestFormatsAndLevels(t *testing.T) {
	var b bytes.Buffer
	h, err := Options{Format: "json", Level: "warn"}.Handler(&b)
	if err != nil {
		t.Fatal(err)
	}
	l := slog.New(h)
	l.Info("hidden")
	l.Warn("shown", "cluster", "lab")
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["msg"] != "shown" || m["cluster"] != "lab" || m["level"] != "WARN" {
		t.Fatalf("json log %q: %v", b.String(), err)
	}
	b.Reset()
	h, _ = Options{Format: "text", Level: "DEBUG"}.Handler(&b)
	slog.New(h).Debug("d", "k", 1)
	if !strings.Contains(b.String(), `level=DEBUG msg=d k=1`) {
		t.Fatalf("text log %q", b.String())
	}
	for _, o := range []Options{{Format: "xml", Level: "info"}, {Format: "text", Level: "loud"}} {
		if _, err := o.Handler(&b); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
