package simulate

import (
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteSVG draws the chart as SVG: per algorithm, a step line of the most
// units it held in the moving window in each bucket of time, against the
// limit (dashed).
func (c *Chart) WriteSVG(w io.Writer) error {
	p := plot.New()
	window := "second"
	if c.Window == 60_000 {
		window = "minute"
	}
	p.Title.Text = fmt.Sprintf("Units admitted to %s in the last %s (the most at any moment of each %s)",
		c.Customer, window, duration(c.Bucket))
	span := float64(c.Bucket) * float64(len(c.Peaks[0]))
	unit, scale := "seconds", 1000.0
	if span > 1200_000 {
		unit, scale = "minutes", 60_000.0
	}
	p.X.Label.Text = unit + " from the start of the trace"
	p.Y.Label.Text = "units in the window"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	limit := plotter.NewFunction(func(float64) float64 { return float64(c.Limit) })
	limit.Color = color.Black
	limit.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	limit.Width = vg.Points(1.5)
	p.Add(limit)
	p.Legend.Add(fmt.Sprintf("limit (%d)", c.Limit), limit)
	var top int64
	for i, peaks := range c.Peaks {
		xys := make(plotter.XYs, len(peaks)+1)
		for b, v := range peaks {
			xys[b] = plotter.XY{X: float64(int64(b)*c.Bucket) / scale, Y: float64(v)}
		}
		// The last bucket's step ends where the bucket does.
		xys[len(peaks)] = plotter.XY{X: span / scale, Y: xys[len(peaks)-1].Y}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.StepStyle = plotter.PostStep
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		line.Width = vg.Points(1.2)
		if c.Names[i] == Exact {
			// Wide and pale, under the algorithms drawn over it.
			line.Color = color.Gray{Y: 190}
			line.Dashes = nil
			line.Width = vg.Points(4)
		}
		top = max(top, slices.Max(peaks))
		p.Add(line)
		p.Legend.Add(c.Names[i], line)
	}
	// Room above the lines for the legend.
	p.Y.Max = float64(max(top, c.Limit)) * 1.5
	canvas := vgsvg.New(11*vg.Inch, 5*vg.Inch)
	p.Draw(draw.New(canvas))
	_, err := canvas.WriteTo(w)
	return err
}

// duration names a span of whole milliseconds briefly.
func duration(ms int64) string {
	switch {
	case ms%60_000 == 0:
		if ms == 60_000 {
			return "minute"
		}
		return fmt.Sprintf("%d minutes", ms/60_000)
	case ms%1000 == 0:
		if ms == 1000 {
			return "second"
		}
		return fmt.Sprintf("%d seconds", ms/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}
