package auth

import (
	"strings"
	"testing"
)

// FuzzParse: any bytes give a token set or an error naming the token file, never a panic;
// a parsed token's secret-free fields hold what the format allows.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("a sha256:" + strings.Repeat("ab", 32) + " rights=admin\n")
	f.Add("a s3cret-s3cret-s3cret rights=read,write salts=x*,\"\",y\n# c\n")
	f.Add("a b rights=\n")
	f.Fuzz(func(t *testing.T, file string) {
		ts, err := Parse(strings.NewReader(file))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "token file") {
				t.Fatalf("error without its subject: %v", err)
			}
			return
		}
		for _, tok := range ts.list {
			if !validName(tok.Name) || tok.Rights == 0 || tok.Rights >= Peer<<1 {
				t.Fatalf("token %q rights %d", tok.Name, tok.Rights)
			}
			for _, s := range tok.Salts {
				if strings.Contains(s, "@") {
					t.Fatalf("salt %q", s)
				}
			}
		}
	})
}
