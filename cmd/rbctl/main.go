// Command rbctl is a toolkit for NVMe Flexible Data Placement research on raw-block LLM
// KV-caches: format, inspect, recover, bench, simulate and fdp-status.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
