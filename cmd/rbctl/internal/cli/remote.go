package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

func init() { register(newRemoteCmd) }

func newRemoteCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "remote", Short: "Talk to a cache node started with rbctl serve"}
	cmd.AddCommand(remoteLeaf("put [FILE|-]", "Store a file (or stdin) on the node under a key", cobra.MaximumNArgs(1), remotePut),
		remoteLeaf("get", "Write a key's payload from the node (or its peers) to stdout or a file", cobra.NoArgs, remoteGet),
		remoteLeaf("ls", "List the node's keys", cobra.NoArgs, remoteLs),
		remoteLeaf("stats", "Print the node's counters and latencies", cobra.NoArgs, remoteStats))
	return cmd
}

type remoteFlags struct {
	server, salt    string
	out             flagsets.Out
	kf              flagsets.Key
	tok             flagsets.Token
	localOnly, json bool
	maxKeys         int
	tls             flagsets.TLS
}

func remoteLeaf(use string, short string, args cobra.PositionalArgs, run func(*cobra.Command, *client.Client, *remoteFlags, []string) error) *cobra.Command {
	var rf remoteFlags
	keyed := use != "ls" && use != "stats"
	c := &cobra.Command{Use: use, Short: short, Args: args, RunE: func(cmd *cobra.Command, a []string) error {
		if keyed {
			if err := rf.kf.Precheck(); err != nil {
				return err
			}
			if err := rf.out.Check(); err != nil {
				return err
			}
		}
		opts, err := rf.tok.DialOptions(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		cl, err := rf.tls.Dial(rf.server, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		return rf.tls.Explain(run(cmd, cl, &rf, a))
	}}
	f := c.Flags()
	f.StringVar(&rf.server, "server", "127.0.0.1:7470", "HOST:PORT of the node's control plane (rbctl serve --listen)")
	f.BoolVar(&rf.json, "json", false, "print JSON")
	rf.tls.Add(c, false)
	rf.tok.Add(c)
	if keyed {
		rf.kf.Add(c)
	}
	switch use {
	case "get":
		rf.out.Add(c, "write the payload to this file instead of stdout")
		f.BoolVar(&rf.localOnly, "local-only", false, "do not let the node ask its peers on a miss")
	case "ls":
		f.StringVar(&rf.salt, "salt", "", "only keys with this cache_salt")
		f.IntVar(&rf.maxKeys, "max-keys", 0, "list at most this many keys (0: the node's cap)")
	}
	return c
}

func remotePut(cmd *cobra.Command, cl *client.Client, rf *remoteFlags, args []string) error {
	max, err := cl.MaxPayload(cmd.Context()) // the node first: nothing is read for a node that is not there
	if err != nil {
		return err
	}
	data, err := flagsets.ReadInput(cmd.Context(), cmd.InOrStdin(), args, max)
	if err != nil {
		return err
	}
	switch err := cl.Store(cmd.Context(), rf.kf.Wire(), data); {
	case err != nil:
		return err
	case rf.json: // as put's
		return printJSON(cmd, map[string]any{"stored": rbEscape(rf.kf.Stored()), "size_bytes": len(data)})
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "stored %d bytes under %s\n", len(data), rbEscape(rf.kf.Stored()))
	return err
}

func remoteGet(cmd *cobra.Command, cl *client.Client, rf *remoteFlags, _ []string) error {
	ch, err := cl.Get(cmd.Context(), rf.kf.Wire(), rf.localOnly)
	switch {
	case err != nil:
		return err
	case ch.Source == p2ppb.Source_SOURCE_MISS:
		return notFound(fmt.Errorf("the key is not on the node %s nor on the peers it asked", rbEscape(rf.server)))
	case rf.json:
		return printJSON(cmd, client.GetDocument(ch))
	}
	return rf.out.Write(cmd.Context(), cmd.OutOrStdout(), ch.Payload)
}

func remoteLs(cmd *cobra.Command, cl *client.Client, rf *remoteFlags, _ []string) error {
	r, err := cl.List(cmd.Context(), rf.salt, rf.maxKeys)
	if err != nil {
		return err
	}
	return show(cmd, rf.json, client.ListDocument(r), func(w io.Writer) error { return client.WriteList(w, r) })
}

func remoteStats(cmd *cobra.Command, cl *client.Client, rf *remoteFlags, _ []string) error {
	s, err := cl.Stats(cmd.Context())
	if err != nil {
		return err
	}
	return show(cmd, rf.json, s, func(w io.Writer) error { return client.WriteStats(w, s) })
}
