// Command results regenerates docs/results from its manifest (make results): every table and
// figure from the rbctl command that made it, several at a time, then checks that every
// output exists and parses, and writes the seed spread of the jobs run over several seeds.
//
//	go run ./tools/results -out docs/results                       # full scale
//	go run ./tools/results -scale 0.1 -out out/results-quick       # RESULTS_SCALE=quick
//	go run ./tools/results -check -out docs/results                # only check the outputs
//	go run ./tools/results -compare docs/results -out out/results  # a second run against the first
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	manifest := flag.String("manifest", "docs/results/manifest.json", "the manifest")
	out := flag.String("out", "docs/results", "output directory")
	scaleS := flag.String("scale", "full", "full, quick (0.1) or a factor in (0, 1]: how much of each run's length to run")
	jobs := flag.Int("j", 2, "jobs at a time")
	rbctl := flag.String("rbctl", "bin/rbctl", "the rbctl binary")
	data := flag.String("data", "../shared/data", "the shared data directory (Mooncake trace)")
	only := flag.String("only", "", "run only the jobs whose name matches this regexp")
	check := flag.Bool("check", false, "run nothing: check the outputs of -out")
	compare := flag.String("compare", "", "after running (or with -check), compare -out's WAF figures with this directory's")
	dry := flag.Bool("n", false, "print the commands, run nothing")
	flag.Parse()
	if err := run(*manifest, *out, *scaleS, *jobs, *rbctl, *data, *only, *check, *compare, *dry); err != nil {
		fmt.Fprintln(os.Stderr, "results:", err)
		os.Exit(1)
	}
}

func parseScale(s string) (float64, error) {
	switch s {
	case "full", "":
		return 1, nil
	case "quick":
		return 0.1, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("scale %q: want full, quick or a factor in (0, 1]", s)
	}
	return f, nil
}

func run(manifest, out, scaleS string, nj int, rbctl, data, only string, check bool, compare string, dry bool) error {
	scale, err := parseScale(scaleS)
	if err != nil {
		return err
	}
	m, err := Load(manifest)
	if err != nil {
		return err
	}
	var re *regexp.Regexp
	if only != "" {
		if re, err = regexp.Compile(only); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "rbctl-results-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	runs, err := m.Expand(scale, out, tmp, data, re)
	if err != nil {
		return err
	}
	if dry {
		for _, r := range runs {
			fmt.Println(rbctl, shellJoin(r.Args))
		}
		return nil
	}
	if !check {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := execute(ctx, runs, nj, rbctl, out, scale); err != nil {
			return err
		}
	}
	var bad []string
	for _, r := range runs {
		for _, o := range r.Outputs {
			if err := checkOutput(filepath.Join(out, o)); err != nil {
				bad = append(bad, fmt.Sprintf("%s (job %s): %v", o, r.Job.Name, err))
			}
		}
	}
	// The spread covers every seeded job whose outputs are there, not only those run now.
	all, err := m.Expand(scale, out, tmp, data, nil)
	if err != nil {
		return err
	}
	var seeded []Run
	for _, r := range all {
		if len(r.Job.Seeds) > 1 && checkOutput(filepath.Join(out, r.Outputs[0])) == nil {
			seeded = append(seeded, r)
		}
	}
	if err := writeSpread(seeded, out); err != nil {
		bad = append(bad, "spread: "+err.Error())
	}
	if compare != "" {
		bad = append(bad, compareDirs(runs, out, compare)...)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d problems:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	fmt.Printf("results: %d runs, every output present and parsed\n", len(runs))
	return nil
}

// timing is one run's record in results-run.json.
type timing struct {
	Job      string  `json:"job"`
	Seed     int     `json:"seed,omitempty"`
	Seconds  float64 `json:"seconds"`
	Expected float64 `json:"expected_seconds"` // the manifest's, times the scale
	Error    string  `json:"error,omitempty"`
}

func execute(ctx context.Context, runs []Run, nj int, rbctl, out string, scale float64) error {
	start := time.Now()
	// Longest first, so the tail of the schedule is short jobs.
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return runs[order[a]].Job.Seconds > runs[order[b]].Job.Seconds })
	times := make([]timing, len(runs))
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	for range max(nj, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := runs[i]
				t0 := time.Now()
				err := runOne(ctx, r, rbctl, out)
				t := timing{Job: r.Job.Name, Seed: r.Seed, Seconds: time.Since(t0).Seconds(), Expected: r.Job.Seconds * scale}
				if err != nil {
					t.Error = err.Error()
				}
				times[i] = t
				mu.Lock()
				status := "ok"
				if err != nil {
					status = "FAILED: " + err.Error()
				}
				fmt.Fprintf(os.Stderr, "[%6.0fs] %-40s %6.1fs %s\n", time.Since(start).Seconds(), label(r), t.Seconds, status)
				mu.Unlock()
			}
		}()
	}
	for _, i := range order {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	rec := map[string]any{"scale": scale, "jobs_at_a_time": nj, "wall_seconds": time.Since(start).Seconds(),
		"started": start.UTC().Format(time.RFC3339), "runs": times}
	b, _ := json.MarshalIndent(rec, "", " ")
	if err := os.WriteFile(filepath.Join(out, "results-run.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "results: %d runs in %.0f s (scale %g, %d at a time)\n", len(runs), time.Since(start).Seconds(), scale, nj)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var failed []string
	for _, t := range times {
		if t.Error != "" {
			failed = append(failed, t.Job)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d runs failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func label(r Run) string {
	if len(r.Job.Seeds) > 0 {
		return fmt.Sprintf("%s seed %d", r.Job.Name, r.Seed)
	}
	return r.Job.Name
}

func runOne(ctx context.Context, r Run, rbctl, out string) error {
	for _, o := range r.Outputs {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(out, o)), 0o755); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, rbctl, r.Args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	if r.Stdout != "" {
		if werr := os.WriteFile(filepath.Join(out, r.Stdout), stdout.Bytes(), 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}

func shellJoin(args []string) string {
	var b []string
	for _, a := range args {
		if strings.ContainsAny(a, " ?&*;") {
			a = strconv.Quote(a)
		}
		b = append(b, a)
	}
	return strings.Join(b, " ")
}

var errEmpty = errors.New("empty")
