package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// Manifest lists every job that makes a file under docs/results.
type Manifest struct {
	About string `json:"about"`
	Jobs  []Job  `json:"jobs"`
}

// Job is one rbctl command and what it writes.
type Job struct {
	Name    string   `json:"name"`
	Cmd     string   `json:"cmd"`              // rbctl's arguments; {out} {tmp} {data} {seed} are replaced
	Outputs []string `json:"outputs"`          // relative to {out}
	Stdout  string   `json:"stdout,omitempty"` // the output that is the command's standard output
	Seconds float64  `json:"seconds"`          // expected wall time at full scale
	Seeds   []int    `json:"seeds,omitempty"`  // run once per seed ({seed})
	// Tolerance is the largest WAF difference between two runs that still reproduces
	// (0: the run is deterministic: simulate with a fixed seed).
	Tolerance float64 `json:"tolerance,omitempty"`
}

// Run is one expanded job: a job at one seed.
type Run struct {
	Job     *Job
	Seed    int
	Args    []string
	Outputs []string
	Stdout  string
}

// Load reads a manifest and checks its jobs: unique names, outputs listed, the stdout
// among them, no output claimed twice.
func Load(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names, outs := map[string]bool{}, map[string]string{}
	for i := range m.Jobs {
		j := &m.Jobs[i]
		if j.Name == "" || names[j.Name] {
			return nil, fmt.Errorf("%s: job %d: empty or repeated name %q", path, i, j.Name)
		}
		names[j.Name] = true
		if len(j.Outputs) == 0 {
			return nil, fmt.Errorf("%s: job %s lists no output", path, j.Name)
		}
		for _, o := range j.Outputs {
			if prev, ok := outs[o]; ok {
				return nil, fmt.Errorf("%s: output %s of job %s is also job %s's", path, o, j.Name, prev)
			}
			outs[o] = j.Name
			if strings.Contains(o, "{seed}") != (len(j.Seeds) > 0) {
				return nil, fmt.Errorf("%s: job %s: an output names {seed} exactly when the job has seeds (%s)", path, j.Name, o)
			}
		}
		if j.Stdout != "" && outs[j.Stdout] != j.Name {
			return nil, fmt.Errorf("%s: job %s: stdout %s is not among its outputs", path, j.Name, j.Stdout)
		}
	}
	return &m, nil
}

// Expand turns the manifest into runs at a scale (1 = full) with the directories filled in.
func (m *Manifest) Expand(scale float64, out, tmp, data string, only *regexp.Regexp) ([]Run, error) {
	var runs []Run
	for i := range m.Jobs {
		j := &m.Jobs[i]
		if only != nil && !only.MatchString(j.Name) {
			continue
		}
		seeds := j.Seeds
		if len(seeds) == 0 {
			seeds = []int{0}
		}
		for _, s := range seeds {
			rep := strings.NewReplacer("{out}", out, "{tmp}", tmp, "{data}", data, "{seed}", strconv.Itoa(s))
			args, err := splitArgs(rep.Replace(j.Cmd))
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", j.Name, err)
			}
			if scale < 1 {
				if args, err = scaleArgs(args, scale); err != nil {
					return nil, fmt.Errorf("job %s: %w", j.Name, err)
				}
			}
			r := Run{Job: j, Seed: s, Args: args}
			rel := strings.NewReplacer("{seed}", strconv.Itoa(s))
			for _, o := range j.Outputs {
				r.Outputs = append(r.Outputs, rel.Replace(o))
			}
			if j.Stdout != "" {
				r.Stdout = rel.Replace(j.Stdout)
			}
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// splitArgs splits a command line on spaces, keeping double-quoted parts whole.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, c := range s {
		switch {
		case c == '"':
			quoted, have = !quoted, true
		case c == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(c)
			have = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unbalanced quote in %q", s)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

// Scaled-down runs (RESULTS_SCALE < 1) keep every configuration's shape and cut its length:
// simulate's window (--warmup, --measure) times the scale, devices of 256 GiB and more a
// sixteenth of their size with RUs to match (so the RU count, hence feasibility, stays),
// a request trace's requests; bench's --requests and --duration times the scale.
const sizeDiv = 16

func scaleArgs(args []string, scale float64) ([]string, error) {
	flag := func(name string) int {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return i + 1
			}
		}
		return -1
	}
	mul := func(name string, def, min float64) error {
		v := def
		i := flag(name)
		if i >= 0 {
			f, err := strconv.ParseFloat(args[i], 64)
			if err != nil {
				return fmt.Errorf("%s %s: %w", name, args[i], err)
			}
			v = f
		}
		s := strconv.FormatFloat(math.Max(v*scale, min), 'f', -1, 64)
		if v == 0 {
			s = "0"
		}
		if i >= 0 {
			args[i] = s
		} else {
			args = append(args, name, s)
		}
		return nil
	}
	switch args[0] {
	case "simulate":
		if strings.Contains(strings.Join(args, " "), "mooncake:") {
			if flag("--requests") < 0 {
				args = append(args, "--requests", strconv.Itoa(int(math.Max(4000*scale, 200))))
			}
			return args, nil
		}
		if err := mul("--warmup", 1, 0.05); err != nil {
			return nil, err
		}
		if err := mul("--measure", 4, 0.1); err != nil {
			return nil, err
		}
		i := flag("--device-size")
		if i < 0 {
			return args, nil
		}
		size, err := units.ParseSize(args[i])
		if err != nil || size < 256<<30 {
			return args, err
		}
		args[i] = units.FormatSpec(size / sizeDiv)
		if j := flag("--ru"); j >= 0 {
			ru, err := units.ParseSize(args[j])
			if err != nil {
				return nil, err
			}
			args[j] = units.FormatSpec(ru / sizeDiv)
		}
		if j := flag("--sweep"); j >= 0 && strings.HasPrefix(args[j], "size=") {
			return nil, fmt.Errorf("a size sweep does not scale; give it its own sizes")
		}
	case "bench":
		if flag("--requests") >= 0 {
			if err := mul("--requests", 0, 200); err != nil {
				return nil, err
			}
			args[flag("--requests")] = strconv.Itoa(int(mustFloat(args[flag("--requests")])))
		}
		if i := flag("--duration"); i >= 0 && args[i] != "0" {
			d, err := parseSeconds(args[i])
			if err != nil {
				return nil, err
			}
			args[i] = strconv.FormatFloat(math.Max(d*scale, 1), 'f', -1, 64) + "s"
		}
		if err := mul("--warmup", 1, 0.05); err != nil {
			return nil, err
		}
	}
	return args, nil
}

func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func parseSeconds(s string) (float64, error) {
	if strings.HasSuffix(s, "s") {
		return strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	}
	return 0, fmt.Errorf("duration %q: want seconds (5s)", s)
}
