package flagsets

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/cluster"
)

// serve joins a cluster only when told to (a name, or seeds); alone, it says so; joined, it
// says which cluster and how many members.
func TestJoinClusterOnlyWhenTold(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, cl := range []cluster.Config{{}, {Cluster: "none"}, {Cluster: "none", Seeds: []string{"127.0.0.1:1"}}} {
		buf.Reset()
		if JoinCluster(cl, log) != nil || !strings.Contains(buf.String(), "serving alone") {
			t.Errorf("%+v: joins, or says %q", cl, buf.String())
		}
	}
	if JoinCluster(cluster.Config{Seeds: []string{"127.0.0.1:1"}}, log) == nil {
		t.Error("seeds without a name: not joined")
	}
	buf.Reset()
	dir := t.TempDir()
	join := JoinCluster(cluster.Config{Cluster: "lab", Name: "n1", BindAddr: "127.0.0.1", RegistryDir: filepath.Join(dir, "reg")}, log)
	if join == nil {
		t.Fatal("--cluster lab: not joined")
	}
	d, c, err := join(context.Background(), p2p.Peer{Control: "127.0.0.1:7470", Data: "127.0.0.1:7471"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = d
	if s := buf.String(); !strings.Contains(s, `msg="joined cluster" cluster=lab members=1`) {
		t.Fatalf("log %q", s)
	}
}
