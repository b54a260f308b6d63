// Command quotasim measures how far quotad's short-window algorithms stray
// from an exact moving window: it replays checks, from a CSV trace or a
// generated workload, through each algorithm as quotad's in-process
// counter decides it, and reports per algorithm the checks decided
// differently, the most units admitted in any moving window, and the
// memory a key takes (see internal/simulate).
//
// Usage:
//
//	quotasim [flags]
//
// It was quotad simulate. It is a command of its own so that the server
// does not carry the plotting library, and its fonts, that the chart needs.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quotad/quotad/internal/simulate"
	"github.com/quotad/quotad/internal/tiers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "quotasim:", err)
		os.Exit(1)
	}
}

const usage = `Usage: quotasim [flags]

Replays checks through each short-window algorithm, decided by quotad's own
in-process counter, and through the exact moving window, and reports per
algorithm: the checks it decided differently from the exact window (given
the units the algorithm itself had admitted in the window before each
check), the most units it admitted to one customer in any moving window
against the limit, and the live heap a key of it takes.

The checks come from a CSV trace (-trace; lines unix_ms,customer,cost, the
header optional) or from a generated workload, the same for the same -seed:

  poisson  a steady Poisson process at -load times the limit per window
  onoff    bursts: on periods (mean one window) at 4 times the mean rate,
           silent off periods (mean three windows) between them
  diurnal  one day's curve over -duration: from 0.2 to 1.8 times the mean
           rate at the middle and back
  heavy    many customers (-customers, 1000 by default), each at -load
           times the limit times a Pareto(scale 0.1, shape 1.2) factor
           capped at 20: most far below the limit, about 6% above it

The chart (-chart) follows the customer asking for the most units.

Flags:
`

// workloadFlags are the flags that shape a generated workload.
var workloadFlags = []string{"workload", "load", "duration", "customers", "cost", "seed"}

// run is quotasim, args with the program's name: it writes the report's
// table to stdout, and so does -h, and writes the files its flags ask for.
// It reads no environment.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		args = args[1:]
	}
	fs := flag.NewFlagSet("quotasim", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	tracePath := fs.String("trace", "", "replay this CSV trace (- for standard input) instead of generating a workload")
	workload := fs.String("workload", simulate.Poisson, "the workload to generate: "+strings.Join(simulate.Workloads, ", "))
	limit := fs.Int64("limit", 100, "the limit: units per window, for every customer")
	windowName := fs.String("window", "second", "the limit's window: second or minute")
	burst := fs.Int64("burst", 0, "the token bucket's size; 0 means the limit")
	load := fs.Float64("load", 1, "the units a customer asks for per window on average, as a multiple of the limit")
	dur := fs.Duration("duration", time.Minute, "how long the generated workload runs")
	customers := fs.Int("customers", 0, "customers of the generated workload; 0 means 1000 for heavy, else 1")
	cost := fs.Int64("cost", 1, "units of each generated check")
	seed := fs.Uint64("seed", 1, "the seed of the generated workload")
	algorithms := fs.String("algorithms", algorithmNames(tiers.Algorithms), "comma-separated algorithms to replay")
	detailPath := fs.String("detail", "", "write each check's decision per algorithm to this CSV file")
	chartPath := fs.String("chart", "", "write the chart to this SVG file")
	writeTrace := fs.String("write-trace", "", "write the replayed trace to this CSV file")
	memoryKeys := fs.Int("memory-keys", 100_000, "measure bytes per key over this many keys (fewer for limits above 100); 0 skips it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	cfg := simulate.Config{Limit: *limit, Burst: *burst, MemoryKeys: max(0, *memoryKeys)}
	var ok bool
	if cfg.Window, ok = tiers.ParseWindow(*windowName); !ok || !cfg.Window.Short() {
		return fmt.Errorf("-window %q: want second or minute", *windowName)
	}
	for _, name := range strings.Split(*algorithms, ",") {
		a, ok := tiers.ParseAlgorithm(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("unknown algorithm %q; want some of %s", name, algorithmNames(tiers.Algorithms))
		}
		cfg.Algorithms = append(cfg.Algorithms, a)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	var tr *simulate.Trace
	var source string
	if *tracePath != "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			for _, name := range workloadFlags {
				if f.Name == name {
					set = append(set, "-"+name)
				}
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("%s shape a generated workload, not a -trace", strings.Join(set, ", "))
		}
		var err error
		if tr, err = readTrace(*tracePath); err != nil {
			return fmt.Errorf("%s: %w", *tracePath, err)
		}
		source = "trace " + *tracePath
	} else {
		w := simulate.Workload{Kind: *workload, Window: cfg.Window.Length().Milliseconds(), Limit: *limit,
			Load: *load, Cost: *cost, Duration: dur.Milliseconds(), Customers: *customers,
			Seed: *seed, Start: simulate.DefaultStart}
		if w.Customers == 0 {
			w.Customers = 1
			if w.Kind == simulate.Heavy {
				w.Customers = 1000
			}
		}
		var err error
		if tr, err = simulate.Generate(w); err != nil {
			return err
		}
		source = fmt.Sprintf("workload %s, seed %d: %s, load %g, %s, cost %d",
			w.Kind, w.Seed, simulate.Count(w.Customers, "customer"), w.Load, *dur, w.Cost)
	}
	if *writeTrace != "" {
		if err := writeFile(*writeTrace, tr.WriteCSV); err != nil {
			return err
		}
	}

	var detail *os.File
	if *detailPath != "" {
		var err error
		if detail, err = os.Create(*detailPath); err != nil {
			return err
		}
		defer detail.Close()
		cfg.Detail = detail
	}
	if *chartPath != "" {
		cfg.ChartBuckets = 600
	}
	rep, err := simulate.Run(ctx, tr, cfg)
	if err != nil {
		return err
	}
	if detail != nil {
		if err := detail.Close(); err != nil {
			return err
		}
	}
	if *chartPath != "" {
		if rep.Chart == nil {
			return errors.New("the trace has no checks to chart")
		}
		if err := writeFile(*chartPath, rep.Chart.WriteSVG); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", source); err != nil {
		return err
	}
	return rep.WriteTable(stdout)
}

func algorithmNames(as []tiers.Algorithm) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

func readTrace(path string) (*simulate.Trace, error) {
	if path == "-" {
		return simulate.ParseCSV(bufio.NewReader(os.Stdin))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return simulate.ParseCSV(bufio.NewReaderSize(f, 256<<10))
}

// writeFile creates path and has write fill it, buffered.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
