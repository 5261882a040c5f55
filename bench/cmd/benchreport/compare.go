package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/perf/benchmath"
)

// errGate is returned by gate when a ratio regressed: exit status 1
// without a usage message.
var errGate = errors.New("ratio targets regressed")

func readReport(path string) (Report, error) {
	var r Report
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// parseInterspersed parses fs's flags wherever they stand among the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ---------------------------------------------------------------------------
// compare

func compareMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	alpha := fs.Float64("alpha", 0.05, "significance level of the Mann-Whitney U test")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: benchreport compare [-alpha 0.05] OLD.json NEW.json\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 {
		fs.Usage()
		return 2
	}
	oldR, err := readReport(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "benchreport compare:", err)
		return 1
	}
	newR, err := readReport(pos[1])
	if err != nil {
		fmt.Fprintln(stderr, "benchreport compare:", err)
		return 1
	}
	compare(stdout, oldR, newR, *alpha)
	return 0
}

// unitOrder lists a benchmark's units: ns/op, B/op, allocs/op, then the
// custom ones by name; "iterations" is not a measurement.
func unitOrder(b Benchmark) []string {
	var fixed, custom []string
	for _, u := range []string{"ns/op", "B/op", "allocs/op"} {
		if _, ok := b.Median[u]; ok {
			fixed = append(fixed, u)
		}
	}
	for u := range b.Median {
		switch u {
		case "ns/op", "B/op", "allocs/op", "iterations":
		default:
			custom = append(custom, u)
		}
	}
	slices.Sort(custom)
	return append(fixed, custom...)
}

func runValues(b Benchmark, unit string) []float64 {
	var vs []float64
	for _, r := range b.Runs {
		if v, ok := r[unit]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// compareUnit compares one unit of a benchmark the way benchstat does: the
// medians, and a Mann-Whitney U test over the runs. delta is "~" when the
// difference is not significant at alpha; note is "(p=0.008 n=5)".
func compareUnit(oldB, newB Benchmark, unit string, alpha float64) (oldMed, newMed float64, delta, note string) {
	th := benchmath.Thresholds{CompareAlpha: alpha}
	ov, nv := runValues(oldB, unit), runValues(newB, unit)
	oldMed, newMed = oldB.Median[unit], newB.Median[unit]
	if len(ov) == 0 || len(nv) == 0 {
		return oldMed, newMed, "?", "(no runs)"
	}
	so, sn := benchmath.NewSample(ov, &th), benchmath.NewSample(nv, &th)
	oldMed = benchmath.AssumeNothing.Summary(so, 0.95).Center
	newMed = benchmath.AssumeNothing.Summary(sn, 0.95).Center
	c := benchmath.AssumeNothing.Compare(so, sn)
	delta = c.FormatDelta(oldMed, newMed)
	note = "(" + c.String() + ")"
	if len(c.Warnings) > 0 && delta == "~" {
		// "all samples are equal", or "need >= 4 samples to detect a
		// difference at alpha level 0.05".
		note = "(" + c.String() + ": " + c.Warnings[0].Error() + ")"
	}
	return oldMed, newMed, delta, note
}

// compare prints the benchmarks present in both reports, unit by unit, and
// the ratios old → new.
func compare(w io.Writer, oldR, newR Report, alpha float64) {
	olds := map[string]Benchmark{}
	for _, b := range oldR.Benchmarks {
		olds[b.Name] = b
	}
	fmt.Fprintf(w, "old: %s  %s\nnew: %s  %s\n\n", oldR.Stamp, oldR.Command, newR.Stamp, newR.Command)
	rows := [][]string{{"benchmark", "unit", "old", "new", "delta", ""}}
	common := 0
	for _, nb := range newR.Benchmarks {
		ob, ok := olds[nb.Name]
		if !ok {
			continue
		}
		common++
		for _, u := range unitOrder(nb) {
			if _, ok := ob.Median[u]; !ok {
				continue
			}
			om, nm, delta, note := compareUnit(ob, nb, u, alpha)
			rows = append(rows, []string{nb.Name, u, fmtNum(om), fmtNum(nm), delta, note})
		}
	}
	writeTable(w, rows, 2, 3, 4)
	if common == 0 {
		fmt.Fprintln(w, "(no benchmark in both reports)")
	}
	fmt.Fprintf(w, "\nU test over the runs, alpha %v: ~ means no significant difference.\n", alpha)

	fmt.Fprintf(w, "\nratios and targets (old → new):\n\n")
	rows = [][]string{{"target", "limit", "old", "new", "delta", "status"}}
	for _, p := range pairResults(oldR.Ratios, newR.Ratios) {
		o, n := p[0], p[1]
		if o.Status == "not run" && n.Status == "not run" {
			continue
		}
		limit := ""
		if n.Op != "" {
			limit = n.Op + " " + fmtNum(n.Limit)
		}
		ov, nv, d := fmtNum(o.Value), fmtNum(n.Value), "?"
		if o.Status == "not run" {
			ov = "–"
		}
		if n.Status == "not run" {
			nv = "–"
		}
		if o.Status != "not run" && n.Status != "not run" {
			d = pct(o.Value, n.Value)
		}
		rows = append(rows, []string{n.What, limit, ov, nv, d, o.Status + " → " + n.Status})
	}
	writeTable(w, rows, 2, 3, 4)
}

// writeTable prints rows in columns two spaces apart, the columns listed in
// right aligned and the others left aligned.
func writeTable(w io.Writer, rows [][]string, right ...int) {
	var widths []int
	for _, r := range rows {
		for i, cell := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i > 0 {
				b.WriteString("  ")
			}
			if slices.Contains(right, i) {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// pairResults matches the results of two reports by What (the k-th result
// with a given What in one with the k-th in the other), in the new
// report's order.
func pairResults(olds, news []Result) [][2]Result {
	byWhat := map[string][]Result{}
	for _, r := range olds {
		byWhat[r.What] = append(byWhat[r.What], r)
	}
	var out [][2]Result
	for _, n := range news {
		prev := byWhat[n.What]
		if len(prev) == 0 {
			continue
		}
		out = append(out, [2]Result{prev[0], n})
		byWhat[n.What] = prev[1:]
	}
	return out
}

func pct(old, new float64) string {
	switch {
	case old == new:
		return "0.00%"
	case old == 0:
		return "?"
	}
	return fmt.Sprintf("%+.2f%%", (new/old-1)*100)
}

// ---------------------------------------------------------------------------
// gate

func gateMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	threshold := fs.Float64("threshold", 0.10, "largest tolerated worsening of a ratio, relative to the old value")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: benchreport gate [-threshold 0.10] OLD.json NEW.json\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 || *threshold < 0 {
		fs.Usage()
		return 2
	}
	oldR, err := readReport(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "benchreport gate:", err)
		return 1
	}
	newR, err := readReport(pos[1])
	if err != nil {
		fmt.Fprintln(stderr, "benchreport gate:", err)
		return 1
	}
	if err := gate(stdout, oldR, newR, *threshold); err != nil {
		fmt.Fprintln(stderr, "benchreport gate:", err)
		return 1
	}
	return 0
}

// isRatio reports whether a result divides two benchmarks' medians. Reports
// written before Result.Ratio existed are judged by their Detail, which
// reads "num / den unit" for a ratio.
func isRatio(r Result) bool {
	if r.Ratio != nil {
		return *r.Ratio
	}
	return strings.Contains(r.Detail, " / ")
}

func judged(r Result) bool { return r.Status == "met" || r.Status == "not met" }

// gateCheck is one ratio target checked by gate.
type gateCheck struct {
	what      string
	op        string
	limit     float64
	old, new  float64
	change    float64 // new/old - 1
	regressed bool
}

// gateChecks compares the ratio targets judged in both reports. A ratio
// regressed when it moved against its target's direction by more than
// threshold relative to its old value: for ">=" smaller, for "<=" larger.
// Absolute targets are left out: on a shared machine they measure the
// machine as much as the code.
func gateChecks(oldR, newR Report, threshold float64) []gateCheck {
	var out []gateCheck
	for _, p := range pairResults(oldR.Ratios, newR.Ratios) {
		o, n := p[0], p[1]
		if n.Op == "" || o.Op != n.Op || !judged(o) || !judged(n) || !isRatio(o) || !isRatio(n) {
			continue
		}
		c := gateCheck{what: n.What, op: n.Op, limit: n.Limit, old: o.Value, new: n.Value}
		switch {
		case o.Value == n.Value:
			c.change = 0
		case o.Value == 0:
			c.change = math.Inf(1)
		default:
			c.change = n.Value/o.Value - 1
		}
		switch n.Op {
		case ">=":
			c.regressed = n.Value < o.Value*(1-threshold)
		case "<=":
			c.regressed = n.Value > o.Value*(1+threshold)
		}
		out = append(out, c)
	}
	return out
}

// gate prints the checked ratios and returns errGate (wrapped with the
// count) when any regressed.
func gate(w io.Writer, oldR, newR Report, threshold float64) error {
	checks := gateChecks(oldR, newR, threshold)
	rows := [][]string{{"ratio target", "target", "old", "new", "change", "verdict"}}
	var bad []string
	for _, c := range checks {
		verdict := "ok"
		if c.regressed {
			verdict = "REGRESSED"
			bad = append(bad, c.what)
		}
		change := strconv.FormatFloat(c.change*100, 'f', 1, 64) + "%"
		if c.change > 0 {
			change = "+" + change
		}
		rows = append(rows, []string{c.what, c.op + " " + fmtNum(c.limit), fmtNum(c.old), fmtNum(c.new), change, verdict})
	}
	writeTable(w, rows, 2, 3, 4)
	fmt.Fprintf(w, "\n%d ratio targets checked, threshold %.0f%% against the old value", len(checks), threshold*100)
	if len(bad) == 0 {
		fmt.Fprintln(w, ": none regressed.")
		return nil
	}
	fmt.Fprintf(w, ": %d regressed:\n", len(bad))
	for _, b := range bad {
		fmt.Fprintf(w, "  %s\n", b)
	}
	return fmt.Errorf("%d %w past %.0f%%", len(bad), errGate, threshold*100)
}
