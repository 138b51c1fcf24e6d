package cli

import (
	"errors"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/nvmetcp"
	"github.com/rbctl/rbctl/units"
)

func init() { register(newEmuCmd) }

// DefaultEmuNQN is the subsystem NQN `rbctl emu serve` uses without --nqn.
const DefaultEmuNQN = "nqn.2026-11.io.rbctl:emu"

func newEmuCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emu",
		Short: "Run the emulated FDP SSD as a device other programs can use",
	}
	cmd.AddCommand(newEmuServeCmd())
	return cmd
}

func newEmuServeCmd() *cobra.Command {
	var (
		listen, writeBudget         string
		allowRemote, logged, asJSON bool
		cfg                         nvmetcp.Config
	)
	cmd := &cobra.Command{
		Use:   "serve DEV-SPEC",
		Short: "Serve the emulated FDP SSD over NVMe/TCP so the kernel attaches it as /dev/nvmeX",
		Long: `Serve an emulated FDP SSD (emu:PATH?size=..&ru=..&ruhs=..) as an NVMe/TCP target. The
Linux nvme-tcp host attaches it as a real controller:

  modprobe nvme-tcp
  echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=` + DefaultEmuNQN + `" > /dev/nvme-fabrics

(or 'nvme connect -t tcp -a 127.0.0.1 -s 4420 -n ` + DefaultEmuNQN + `'). The target listens on
loopback only unless --allow-remote is given; it has no authentication. It runs until
interrupted, then saves the device's FDP state. See docs/nvmetcp.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := args[0]
			if !emu.IsSpec(spec) {
				return fmt.Errorf("%q is not an emulated device spec; use emu:PATH?size=..&ru=..&ruhs=.. (emu:mem for memory)", spec)
			}
			if err := nvmetcp.CheckNQN(cfg.NQN); err != nil {
				return fmt.Errorf("--nqn: %w", err)
			}
			if err := nvmetcp.CheckListen(listen, allowRemote); errors.Is(err, nvmetcp.ErrNotLoopback) {
				return fmt.Errorf("--listen: %w; use 127.0.0.1:PORT, or pass --allow-remote to expose it", err)
			} else if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			var err error
			if cfg.WriteBudget, err = units.ParseSize(writeBudget); err != nil {
				return fmt.Errorf("--write-budget %q: %v", writeBudget, err)
			}
			ctrl, err := emu.Open(spec)
			if err != nil {
				return err
			}
			cfg.Backend = ctrl
			if logged {
				cfg.Logf = func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			}
			err = nvmetcp.ListenAndServe(cmd.Context(), listen, cfg, func(a net.Addr) error {
				if asJSON {
					return flagsets.WriteJSON(cmd.OutOrStdout(), map[string]string{"spec": spec, "nqn": cfg.NQN, "listen": a.String(), "transport": "tcp"})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "serving %s as %s on %s (NVMe/TCP)\n", spec, cfg.NQN, a)
				return err
			})
			if cerr := ctrl.Close(); err == nil { // saves the FDP state
				err = cerr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4420", "TCP address to listen on (4420 is the NVMe/TCP port)")
	f.StringVar(&cfg.NQN, "nqn", DefaultEmuNQN, "subsystem NQN hosts connect to")
	f.BoolVar(&allowRemote, "allow-remote", false, "listen on a non-loopback address (the target has no authentication)")
	f.IntVar(&cfg.MaxIOQueues, "io-queues", nvmetcp.DefaultMaxIOQueues, "I/O queues a host may create")
	f.IntVar(&cfg.QueueSize, "queue-size", nvmetcp.DefaultQueueSize, "entries per submission queue (CAP.MQES+1)")
	f.StringVar(&writeBudget, "write-budget", "256MiB", "write data the target buffers at once over all hosts; R2Ts wait beyond it (at least one MDTS transfer)")
	f.IntVar(&cfg.MaxConnections, "max-connections", nvmetcp.DefaultMaxConnections, "TCP connections served at once; more are closed at accept")
	f.IntVar(&cfg.MaxControllers, "max-controllers", nvmetcp.DefaultMaxControllers, "controllers (admin queues) at once; more get Connect Controller Busy")
	f.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", nvmetcp.DefaultHandshakeTimeout, "close a connection that has not sent ICReq and Connect within this")
	f.DurationVar(&cfg.StallTimeout, "stall-timeout", nvmetcp.DefaultStallTimeout, "close a connection whose PDU, R2T transfer or reply makes no progress for this long")
	f.DurationVar(&cfg.KeepAliveSlack, "keepalive-slack", nvmetcp.DefaultKeepAliveSlack, "time past the host's keep-alive timeout (KATO) before its controller is ended")
	f.DurationVar(&cfg.IdleTimeout, "idle-timeout", nvmetcp.DefaultIdleTimeout, "end a controller with keep-alive off (KATO 0) after this long without a command")
	f.BoolVar(&asJSON, "json", false, "print what is served (spec, NQN, address) as one JSON object")
	f.BoolVar(&logged, "log", false, "log connections and disconnections on stderr")
	return cmd
}
