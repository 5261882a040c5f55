package main

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Charts are SVG files drawn with gonum.org/v1/plot from a Report. Their
// file names are stable (no stamp), so that a run can overwrite the ones
// committed under docs/images.

// scaleChart is one "cost per operation against collection size" chart.
type scaleChart struct {
	file, title string
	// pattern is a benchmark name with {n} for the size and {impl} for the
	// implementation.
	pattern string
	// impls are drawn in this order, each only if it is in the results.
	impls []string
	// labels overrides implLabels for this chart.
	labels map[string]string
}

// implLabels name the implementations in the legends.
var implLabels = map[string]string{
	"storh":          "storh-go",
	"storh-nodecode": "storh-go, not decoded",
	"storh-lend":     "storh-go, lent (no copy)",
	"bolt":           "raw bbolt + msgpack",
	"bolt-copy":      "raw bbolt, copied, not decoded",
	"bolt-nodecode":  "raw bbolt, not decoded",
	"bolthold":       "bolthold",
	"sqlite":         "SQLite (WAL, go-sqlite3)",
}

var scaleCharts = []scaleChart{
	{
		file: "scale-page.svg", title: "Page of 100 records",
		pattern: "BenchmarkPage/{n}/impl={impl}",
		impls:   []string{"storh", "bolt", "sqlite", "storh-nodecode", "bolt-copy"},
		labels: map[string]string{
			"storh": "storh-go, decoded",
			"bolt":  "raw bbolt seek + msgpack.Unmarshal",
		},
	},
	{
		file: "scale-window.svg", title: "200-record time window",
		pattern: "BenchmarkTimeWindow/{n}/impl={impl}",
		impls:   []string{"storh", "bolt", "sqlite"},
	},
	{
		file: "scale-query-eq.svg", title: "Indexed Eq on status, limit 100",
		pattern: "BenchmarkQueryEq/field=status/{n}/impl={impl}",
		impls:   []string{"storh", "bolthold", "sqlite"},
	},
	{
		file: "scale-query-range.svg", title: "Indexed range ordered by it, limit 100",
		pattern: "BenchmarkQueryRange/{n}/impl={impl}",
		impls:   []string{"storh", "bolthold", "sqlite"},
	},
	{
		file: "scale-get.svg", title: "Point Get by id, not decoded",
		pattern: "BenchmarkGet/{n}/impl={impl}",
		impls:   []string{"storh", "storh-lend", "bolt", "bolt-copy"},
		labels: map[string]string{
			"storh":      "storh-go Get",
			"storh-lend": "storh-go GetRaw (lent)",
			"bolt":       "raw bbolt View + Get",
			"bolt-copy":  "raw bbolt View + Get + copy",
		},
	},
}

// chartFile is a chart that was written.
type chartFile struct {
	Name  string // file name, e.g. scale-page.svg
	Title string
}

const ratiosFile = "ratios.svg"

// chartFormat is the format the charts are drawn in (the tests may look
// at them as PNG).
var chartFormat = "svg"

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// charts draws every chart the report has data for, as SVG documents keyed
// by file name, in a stable order.
func charts(r Report) ([]chartFile, map[string][]byte, error) {
	var files []chartFile
	out := map[string][]byte{}
	for _, sc := range scaleCharts {
		svg, ok, err := scalePlot(sc, r.Benchmarks)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sc.file, err)
		}
		if ok {
			files = append(files, chartFile{sc.file, sc.title})
			out[sc.file] = svg
		}
	}
	svg, ok, err := ratiosPlot(r.Ratios)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ratiosFile, err)
	}
	if ok {
		files = append(files, chartFile{ratiosFile, "Targets: measured / target"})
		out[ratiosFile] = svg
	}
	return files, out, nil
}

// writeCharts writes the charts into each of dirs.
func writeCharts(files []chartFile, svgs map[string][]byte, dirs ...string) error {
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.Name), svgs[f.Name], 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// series is one implementation's points: size → µs per operation.
type series struct {
	impl  string
	label string
	xys   plotter.XYs
}

// scaleSeries collects a scale chart's points from the medians.
func scaleSeries(sc scaleChart, bs []Benchmark) (all []series, sizes []float64) {
	seen := map[float64]bool{}
	for _, impl := range sc.impls {
		before, after, _ := strings.Cut(strings.ReplaceAll(sc.pattern, "{impl}", impl), "{n}")
		re := regexp.MustCompile("^" + regexp.QuoteMeta(before) + `(n=[0-9]+[kM]?)` + regexp.QuoteMeta(after) + "$")
		s := series{impl: impl, label: implLabels[impl]}
		if l, ok := sc.labels[impl]; ok {
			s.label = l
		}
		if s.label == "" {
			s.label = impl
		}
		for _, b := range bs {
			m := re.FindStringSubmatch(b.Name)
			if m == nil {
				continue
			}
			ns, ok := b.Median["ns/op"]
			if !ok || !(ns > 0) || math.IsInf(ns, 0) {
				continue
			}
			x := sizeValue(m[1])
			s.xys = append(s.xys, plotter.XY{X: x, Y: ns / 1e3})
			if !seen[x] {
				seen[x] = true
				sizes = append(sizes, x)
			}
		}
		if len(s.xys) > 0 {
			slices.SortFunc(s.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			all = append(all, s)
		}
	}
	slices.Sort(sizes)
	return all, sizes
}

// scalePlot draws one scale chart; ok is false when the results hold fewer
// than two sizes of it.
func scalePlot(sc scaleChart, bs []Benchmark) (svg []byte, ok bool, err error) {
	all, sizes := scaleSeries(sc, bs)
	if len(sizes) < 2 {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = sc.title
	p.X.Label.Text = "collection size n (log scale)"
	p.Y.Label.Text = "µs per operation (log scale)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.Add(plotter.NewGrid())

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range all {
		line, points, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, false, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		legend.Add(s.label, line, points)
		for _, xy := range s.xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	// Half a step of the log axis either side of the sizes.
	p.X.Min, p.X.Max = sizes[0]/1.6, sizes[len(sizes)-1]*1.6
	ticks := make(plot.ConstantTicks, len(sizes))
	for i, x := range sizes {
		ticks[i] = plot.Tick{Value: x, Label: sizeLabel(x)}
	}
	p.X.Tick.Marker = ticks
	p.Y.Min, p.Y.Max = lo/1.4, hi*1.4
	p.Y.Tick.Marker = logTicks{}

	const w, h = 8 * vg.Inch, 4 * vg.Inch
	return drawWithLegend(p, legend, w, h)
}

// drawWithLegend draws p with the legend in a column to its right, where
// it cannot hide a line.
func drawWithLegend(p *plot.Plot, legend plot.Legend, w, h vg.Length) ([]byte, bool, error) {
	c, err := draw.NewFormattedCanvas(w, h, chartFormat)
	if err != nil {
		return nil, false, err
	}
	dc := draw.New(c)
	lw := legend.Rectangle(dc).Size().X + 12
	p.Draw(draw.Crop(dc, 6, -lw, 4, -4))
	// Align the legend's top with the top of the data area, under the
	// title.
	top := p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding + 10
	legend.Draw(draw.Crop(dc, w-lw+8, 0, 0, -top))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), true, nil
}

func sizeLabel(x float64) string {
	switch {
	case x >= 1e6 && math.Mod(x, 1e6) == 0:
		return strconv.FormatFloat(x/1e6, 'f', -1, 64) + "M"
	case x >= 1e3 && math.Mod(x, 1e3) == 0:
		return strconv.FormatFloat(x/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// logTicks labels a log axis at 1, 2 and 5 times the powers of ten in
// range (all nine multiples when the range spans less than a factor of 10),
// unlike plot.LogTicks, which labels only the powers of ten and so
// nothing on a narrow range.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	labelAll := hi/lo < 10
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if labelAll || m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', max(0, int(-e)), 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// Ratio chart.

// score puts a target on a common scale: ≥ 1 means met. ok is false for
// results that cannot be drawn that way (not a target, not run, limit 0).
func score(r Result) (float64, bool) {
	if r.Op == "" || (r.Status != "met" && r.Status != "not met") || !(r.Limit > 0) {
		return 0, false
	}
	var s float64
	switch r.Op {
	case ">=":
		s = r.Value / r.Limit
	case "<=":
		s = r.Limit / r.Value
	default:
		return 0, false
	}
	if !(s > 0) || math.IsInf(s, 0) || math.IsNaN(s) {
		return 0, false
	}
	return s, true
}

// shortWhat drops a trailing parenthesis ("(time ratio)", "(speed-up)")
// from a target's description.
func shortWhat(what string) string {
	if strings.HasSuffix(what, ")") {
		if i := strings.LastIndex(what, " ("); i > 0 {
			return what[:i]
		}
	}
	return what
}

var (
	metColor    = color.RGBA{R: 0x2e, G: 0x8b, B: 0x57, A: 0xff}
	notMetColor = color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff}
)

// ratioBars draws horizontal bars from 1 (the target) to each score, so
// that a bar to the right of the target line is a target met by that
// factor and one to its left a target missed.
type ratioBars struct {
	scores []float64 // bar i is drawn at y = i
	colors []color.Color
}

func (b ratioBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, s := range b.scores {
		x0, x1 := trX(1), trX(s)
		y0, y1 := trY(float64(i)-0.32), trY(float64(i)+0.32)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.colors[i], c.ClipPolygonXY(pts))
	}
}

func (b ratioBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 1, 1
	for _, s := range b.scores {
		xmin, xmax = math.Min(xmin, s), math.Max(xmax, s)
	}
	return xmin, xmax, -0.5, float64(len(b.scores)) - 0.5
}

// swatch is a legend thumbnail: a filled box.
type swatch struct{ color color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	}
	c.FillPolygon(s.color, c.ClipPolygonXY(pts))
}

// ratiosPlot draws every target that can be scaled; ok is false when there
// is none.
func ratiosPlot(rs []Result) ([]byte, bool, error) {
	type bar struct {
		label string
		score float64
		met   bool
	}
	var bars []bar
	for _, r := range rs {
		if s, ok := score(r); ok {
			bars = append(bars, bar{shortWhat(r.What), s, r.Status == "met"})
		}
	}
	if len(bars) == 0 {
		return nil, false, nil
	}
	n := len(bars)
	// The first target at the top.
	rb := ratioBars{scores: make([]float64, n), colors: make([]color.Color, n)}
	names := make([]string, n)
	valueLabels := plotter.XYLabels{XYs: make(plotter.XYs, n), Labels: make([]string, n)}
	for i, b := range bars {
		y := n - 1 - i
		rb.scores[y] = b.score
		rb.colors[y] = notMetColor
		if b.met {
			rb.colors[y] = metColor
		}
		names[y] = b.label
		// Right of the bar, or of the target line for a bar left of it.
		valueLabels.XYs[y] = plotter.XY{X: math.Max(b.score, 1), Y: float64(y)}
		valueLabels.Labels[y] = " " + strconv.FormatFloat(b.score, 'g', 3, 64) + "× "
	}

	p := plot.New()
	p.Title.Text = "Targets: how far each is from its limit (≥ 1 met)"
	p.X.Label.Text = "measured/limit (≥ targets) or limit/measured (≤ targets), log scale"
	p.X.Scale = plot.LogScale{}
	p.NominalY(names...)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	p.Add(grid, rb)

	lo, hi, _, _ := rb.DataRange()
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	p.X.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = -0.7, float64(n)+0.3

	target, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.7}, {X: 1, Y: float64(n) - 0.4}})
	if err != nil {
		return nil, false, err
	}
	target.Width = vg.Points(1.5)
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	targetLabel, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 1, Y: float64(n) - 0.35}}, Labels: []string{"target"}})
	if err != nil {
		return nil, false, err
	}
	targetLabel.TextStyle[0].XAlign = draw.XCenter
	values, err := plotter.NewLabels(valueLabels)
	if err != nil {
		return nil, false, err
	}
	for i := range values.TextStyle {
		values.TextStyle[i].Font.Size = vg.Points(8)
		values.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(target, targetLabel, values)

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.Add("met", swatch{metColor})
	legend.Add("not met", swatch{notMetColor})
	legend.Add("target (1)", target)

	longest := 0
	for _, s := range names {
		longest = max(longest, len([]rune(s)))
	}
	w := vg.Length(5.5*72) + vg.Length(longest)*vg.Points(4.7)
	h := vg.Length(n)*vg.Points(16) + vg.Points(110)
	return drawWithLegend(p, legend, w, h)
}
