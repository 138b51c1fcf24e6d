package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples is every command's Examples section, by command path; NewRoot attaches them and
// TestEveryCommandHasExamples keeps the table complete. One place, so the help of every
// command reads alike.
var examples = map[string][]string{
	"rbctl": {
		"rbctl format --create 1G --slot-bytes 256K /var/tmp/cache.img",
		"rbctl bench 'emu:/var/tmp/fdp.img?size=2G&ru=8M&ruhs=8&op=0.07' --placement none,cache-salt,hotness --duration 10s",
		"rbctl fdp-status /dev/ng0n1",
	},
	"rbctl bench": {
		"# four policies on a file-backed emulated FDP SSD (device WAF from its FTL model)",
		"rbctl bench 'emu:/var/tmp/fdp.img?size=2G&ru=8M&ruhs=8&op=0.07' --placement none,cache-salt,hotness --duration 10s",
		"# a real FDP namespace, JSON saved for later",
		"rbctl bench /dev/ng0n1 --force --placement none,cache-salt --duration 60s --save run.json",
		"# a plain file (host WAF from the shadow FTL model only)",
		"rbctl bench /var/tmp/bench.img --create 1G --ru 4M --workers 4 --duration 10s",
		"# one cache over two files, a row per device (--shard-by kv-rank: TP rank r on device r)",
		"rbctl bench /var/tmp/a.img /var/tmp/b.img --create 1G --json",
	},
	"rbctl simulate": {
		"rbctl simulate --device-size 1T --util 0.9 --placement none,cache-salt,metadata-class+cache-salt",
		"rbctl simulate --device-size 1T --util 0.95 --eviction region --placement none,cache-salt --save sim.json",
		"rbctl simulate --device-size 256G --sweep util=0.8:0.95:0.05 --plot out/sweep",
		"rbctl simulate --device-size 256G --preset workers:8 --budgets equal --placement none,cache_salt_prefix",
		"rbctl simulate --device-size 256G --lmcache-config lmcache.json --placement none",
	},
	"rbctl format": {
		"rbctl format --create 1G --slot-bytes 256K /var/tmp/cache.img",
		"rbctl format --compat lmcache-v1 --slot-bytes 1M --meta-bytes 256M /dev/nvme0n1",
		"rbctl format --lmcache-config lmcache.json",
		"rbctl format --create 1G --slot-bytes 256K /var/tmp/shard0.img /var/tmp/shard1.img   # one cache, two shards",
	},
	"rbctl inspect": {
		"rbctl inspect /var/tmp/cache.img",
		"rbctl inspect --list-keys --max-keys 20 /dev/nvme0n1",
		"rbctl inspect --json /var/tmp/cache.img",
		"rbctl inspect /var/tmp/shard0.img /var/tmp/shard1.img   # a row per shard and the total",
	},
	"rbctl recover": {
		"rbctl recover --dry-run /var/tmp/cache.img",
		"rbctl recover --verify /var/tmp/cache.img",
		"rbctl recover --dry-run /var/tmp/shard0.img /var/tmp/shard1.img",
		"rbctl recover --scan --dry-run /var/tmp/cache.img   # both checkpoints damaged: what the slot headers rebuild",
		"rbctl recover --scan --slot-bytes 256K /var/tmp/cache.img   # rebuild it; the layout when the checkpoints cannot show it",
	},
	"rbctl put": {
		"rbctl put cache.img --model-name my/model --rank 0 --hash 00ff --salt tenant data.bin",
		"echo hello | rbctl put cache.img --key 'm@0x00000000@aa' -",
		"rbctl format 'emu:/var/tmp/e.img?size=1G&ru=8M&ruhs=8' --placement cache-salt   # an emulated FDP SSD, made and formatted",
		"rbctl put 'emu:/var/tmp/e.img' --placement cache-salt --model-name m --hash 01 --salt rag doc.bin",
	},
	"rbctl get": {
		"rbctl get /var/tmp/cache.img --key 'my%2Fmodel@0x00000000@00ff@tenant'",
		"rbctl get /var/tmp/cache.img --model-name my/model --hash 00ff --salt tenant -o chunk.bin",
	},
	"rbctl ls": {
		"rbctl ls /var/tmp/cache.img",
		"rbctl ls --salt tenant --json /var/tmp/cache.img",
	},
	"rbctl rm": {
		"rbctl rm /var/tmp/cache.img --key 'm@0x00000000@aa'",
		"rbctl rm /var/tmp/cache.img --model-name my/model --hash 00ff --salt tenant",
	},
	"rbctl fdp-status": {
		"rbctl fdp-status /dev/ng0n1",
		"rbctl fdp-status --json /dev/ng0n1",
		"rbctl fdp-status --watch 2s --count 10 /dev/ng0n1",
	},
	"rbctl fdp": {
		"rbctl fdp configs /dev/nvme0 -e 1",
		"rbctl fdp status /dev/ng0n1 -o json",
	},
	"rbctl fdp configs":    {"rbctl fdp configs /dev/nvme0 --endgrp-id 1", "rbctl fdp configs /dev/nvme0 -e 1 -o json"},
	"rbctl fdp usage":      {"rbctl fdp usage /dev/nvme0 -e 1", "rbctl fdp usage /dev/nvme0 -e 1 -o json"},
	"rbctl fdp stats":      {"rbctl fdp stats /dev/nvme0 -e 1", "rbctl fdp stats /dev/nvme0 -e 1 -o binary > stats.bin"},
	"rbctl fdp events":     {"rbctl fdp events /dev/nvme0 -e 1", "rbctl fdp events /dev/nvme0 -e 1 --host-events -o json"},
	"rbctl fdp status":     {"rbctl fdp status /dev/ng0n1", "rbctl fdp status /dev/ng0n1 -n 1 -o json"},
	"rbctl fdp update":     {"rbctl fdp update /dev/ng0n1 --pids 0,1 --yes   # reset the reclaim units of PIDs 0 and 1"},
	"rbctl fdp set-events": {"rbctl fdp set-events /dev/ng0n1 --placement-handle 0 --event-types 0,3 --enable --yes   # RU not fully written, invalid placement ID"},
	"rbctl fdp feature":    {"rbctl fdp feature /dev/nvme0 -e 1            # show the FDP feature", "rbctl fdp feature /dev/nvme0 -e 1 -c 0 --yes   # enable FDP configuration 0"},
	"rbctl identify":       {"rbctl identify /dev/ng0n1", "rbctl identify --json 'emu:/var/tmp/fdp.img'"},
	"rbctl nvme":           {"rbctl nvme log /dev/nvme0 --lid 2"},
	"rbctl nvme log": {
		"rbctl nvme log /dev/ng0n1 --lid 0x02 --len 512",
		"rbctl nvme log /dev/ng0n1 --lid 0x22 --lsi 1 --len 64 --raw > stats.bin",
	},
	"rbctl cluster-bench": {
		"rbctl cluster-bench",
		"rbctl cluster-bench --nodes 4 --tenants 16 --requests 4000 --modes off,fetch-only --json",
	},
	"rbctl emu": {"rbctl emu serve 'emu:/var/tmp/fdp.img?size=2G&ru=8M&ruhs=8' --listen 127.0.0.1:4420"},
	"rbctl emu serve": {
		"rbctl emu serve 'emu:/var/tmp/fdp.img?size=2G&ru=8M&ruhs=8' --listen 127.0.0.1:4420",
		"nvme connect -t tcp -a 127.0.0.1 -s 4420 -n nqn.2026-11.io.rbctl:emu   # on the same host",
	},
	"rbctl serve": {
		"rbctl serve /var/tmp/a.img /var/tmp/b.img --listen 127.0.0.1:7470   # one node over the two-device cache bench made",
		"rbctl serve /var/tmp/cache.img --listen 127.0.0.1:7480 --peers 127.0.0.1:7470   # fetches the first node's chunks on a miss",
	},
	"rbctl remote":                {"rbctl remote stats --server 127.0.0.1:7470"},
	"rbctl remote put":            {"echo hello | rbctl remote put --server 127.0.0.1:7470 --model-name my/model --hash 00ff --salt tenant -"},
	"rbctl remote get":            {"rbctl remote get --server 127.0.0.1:7480 --model-name my/model --hash 00ff --salt tenant -o chunk.bin"},
	"rbctl remote ls":             {"rbctl remote ls --server 127.0.0.1:7470 --salt tenant", "rbctl remote ls --server 127.0.0.1:7470 --json"},
	"rbctl remote stats":          {"rbctl remote stats --server 127.0.0.1:7480 --json"},
	"rbctl torture":               {"rbctl torture --kills 50 --seed 7", "rbctl torture --kills 200 --json > torture.json"},
	"rbctl version":               {"rbctl version", "rbctl --version", "rbctl version --json"},
	"rbctl help":                  {"rbctl help bench"},
	"rbctl completion":            {"rbctl completion bash > /etc/bash_completion.d/rbctl"},
	"rbctl completion bash":       {"source <(rbctl completion bash)"},
	"rbctl completion zsh":        {"rbctl completion zsh > \"${fpath[1]}/_rbctl\""},
	"rbctl completion fish":       {"rbctl completion fish > ~/.config/fish/completions/rbctl.fish"},
	"rbctl completion powershell": {"rbctl completion powershell | Out-String | Invoke-Expression"},
}

// attachExamples sets each command's Example from the table, unless the command has its own.
func attachExamples(c *cobra.Command) {
	if ex, ok := examples[c.CommandPath()]; ok && c.Example == "" {
		c.Example = "  " + strings.Join(ex, "\n  ")
	}
	for _, s := range c.Commands() {
		attachExamples(s)
	}
}
