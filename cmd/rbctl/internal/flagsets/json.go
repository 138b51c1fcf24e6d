package flagsets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// JSONSchemaVersion is the schema_version of every --json document whose own type does not
// state one (a report states its own: reports.SchemaVersion).
const JSONSchemaVersion = 1

// SchemaOf names the --json document of a command: "rbctl.ls", "rbctl.remote.stats".
func SchemaOf(commandPath string) string { return strings.ReplaceAll(commandPath, " ", ".") }

// Document writes v as the --json document of a command: an object that starts with
// "schema" and "schema_version" (v's own when it has them), indented. A list (ls's keys)
// becomes the member listKey of that object.
func Document(w io.Writer, schema, listKey string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	raw = bytes.TrimSpace(raw)
	head := fmt.Sprintf(`{"schema":%q,"schema_version":%d`, schema, JSONSchemaVersion)
	switch {
	case len(raw) > 0 && raw[0] == '[' || string(raw) == "null":
		raw = []byte(head + `,"` + listKey + `":` + strings.Replace(string(raw), "null", "[]", 1) + "}")
	case len(raw) > 0 && raw[0] == '{':
		var probe struct {
			Schema *string `json:"schema"`
		}
		if json.Unmarshal(raw, &probe) == nil && probe.Schema == nil {
			if string(raw) == "{}" {
				raw = []byte(head + "}")
			} else {
				raw = []byte(head + "," + string(raw[1:]))
			}
		}
	default:
		raw = []byte(head + `,"value":` + string(raw) + "}")
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}
