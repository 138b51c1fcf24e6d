package plots

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// gridPad is the space between and around a grid's figures.
const gridPad = 4 * vg.Millimeter

// DrawGrid draws figures in rows onto c, every row as long as the first: their data areas
// aligned (plot.Align) and each with its legend in a strip as wide as the widest figure's.
func DrawGrid(c draw.Canvas, grid [][]*Figure) error {
	if len(grid) == 0 || len(grid[0]) == 0 {
		return ErrNoData
	}
	strip := gridStrip(grid)
	ps := make([][]*plot.Plot, len(grid))
	for j, row := range grid {
		if len(row) != len(grid[0]) {
			return fmt.Errorf("grid row %d has %d figures, row 0 has %d", j, len(row), len(grid[0]))
		}
		for _, f := range row {
			if f == nil {
				return errors.New("grid: a figure is missing")
			}
			ps[j] = append(ps[j], f.Plot)
		}
	}
	tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadX: gridPad, PadY: gridPad,
		PadTop: gridPad / 2, PadBottom: gridPad / 2, PadLeft: gridPad / 2, PadRight: gridPad / 2}
	cs := plot.Align(ps, tiles, c)
	for j, row := range grid {
		for i, f := range row {
			f.Draw(cs[j][i], strip)
		}
	}
	return nil
}

// gridStrip fits every figure and returns the widest legend strip.
func gridStrip(grid [][]*Figure) vg.Length {
	var strip vg.Length
	for _, row := range grid {
		for _, f := range row {
			if f != nil {
				f.fit()
				strip = max(strip, f.LegendWidth())
			}
		}
	}
	return strip
}

// SaveGrid writes the grid (DrawGrid) as one image, PNG or SVG by path's extension, each
// figure Width × Height plus the legend strip.
func SaveGrid(path string, grid [][]*Figure) error {
	if len(grid) == 0 || len(grid[0]) == 0 {
		return ErrNoData
	}
	format := strings.TrimPrefix(filepath.Ext(path), ".")
	w := vg.Length(len(grid[0]))*(Width+gridStrip(grid)) + vg.Length(len(grid[0]))*gridPad
	h := vg.Length(len(grid))*Height + vg.Length(len(grid))*gridPad
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dc := draw.New(c)
	fillBackground(dc)
	if err := DrawGrid(dc, grid); err != nil {
		return err
	}
	if err := writeCanvas(path, c); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
