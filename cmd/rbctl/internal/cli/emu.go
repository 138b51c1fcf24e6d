package cli

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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
		listen, nqn, writeBudget             string
		allowRemote, logged                  bool
		ioQueues, queueSize, maxConns, maxCt int
		handshake, stall, kaSlack, idle      time.Duration
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
			if err := nvmetcp.CheckNQN(nqn); err != nil {
				return fmt.Errorf("--nqn: %w", err)
			}
			if err := nvmetcp.CheckListen(listen, allowRemote); err != nil {
				return err
			}
			budget, err := units.ParseSize(writeBudget)
			if err != nil {
				return fmt.Errorf("--write-budget %q: %v", writeBudget, err)
			}
			ctrl, err := emu.Open(spec)
			if err != nil {
				return err
			}
			defer ctrl.Close()
			cfg := nvmetcp.Config{NQN: nqn, Backend: ctrl, MaxIOQueues: ioQueues, QueueSize: queueSize,
				WriteBudget: budget, MaxConnections: maxConns, MaxControllers: maxCt,
				HandshakeTimeout: handshake, StallTimeout: stall, KeepAliveSlack: kaSlack, IdleTimeout: idle}
			if logged {
				cfg.Logf = func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			}
			tgt, err := nvmetcp.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w (is another target using the port?)", listen, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s as %s on %s (NVMe/TCP)\n", spec, nqn, ln.Addr())
			errc := make(chan error, 1)
			go func() { errc <- tgt.Serve(ln) }()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			select {
			case <-cmd.Context().Done():
			case <-sig:
			case err = <-errc:
			}
			tgt.Close()
			if cerr := ctrl.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4420", "TCP address to listen on (4420 is the NVMe/TCP port)")
	f.StringVar(&nqn, "nqn", DefaultEmuNQN, "subsystem NQN hosts connect to")
	f.BoolVar(&allowRemote, "allow-remote", false, "listen on a non-loopback address (the target has no authentication)")
	f.IntVar(&ioQueues, "io-queues", nvmetcp.DefaultMaxIOQueues, "I/O queues a host may create")
	f.IntVar(&queueSize, "queue-size", nvmetcp.DefaultQueueSize, "entries per submission queue (CAP.MQES+1)")
	f.StringVar(&writeBudget, "write-budget", "256MiB", "write data the target buffers at once over all hosts; R2Ts wait beyond it (at least one MDTS transfer)")
	f.IntVar(&maxConns, "max-connections", nvmetcp.DefaultMaxConnections, "TCP connections served at once; more are closed at accept")
	f.IntVar(&maxCt, "max-controllers", nvmetcp.DefaultMaxControllers, "controllers (admin queues) at once; more get Connect Controller Busy")
	f.DurationVar(&handshake, "handshake-timeout", nvmetcp.DefaultHandshakeTimeout, "close a connection that has not sent ICReq and Connect within this")
	f.DurationVar(&stall, "stall-timeout", nvmetcp.DefaultStallTimeout, "close a connection whose PDU, R2T transfer or reply makes no progress for this long")
	f.DurationVar(&kaSlack, "keepalive-slack", nvmetcp.DefaultKeepAliveSlack, "time past the host's keep-alive timeout (KATO) before its controller is ended")
	f.DurationVar(&idle, "idle-timeout", nvmetcp.DefaultIdleTimeout, "end a controller with keep-alive off (KATO 0) after this long without a command")
	f.BoolVar(&logged, "log", false, "log connections and disconnections on stderr")
	return cmd
}
