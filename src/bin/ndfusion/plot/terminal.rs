//! A chart drawn in the terminal: each character cell is two pixels, the upper half block
//! `▀` in the upper pixel's colour over the lower pixel's colour (24-bit colour escapes), with
//! the axes' extremes as labels, the columns' names, and a heat map's colour bar.

use super::{colour, points_in_x_order, Axis, Chart, Grid, LINE};

type Rgb = (u8, u8, u8);

/// Pixels, row 0 at the top; `None` is the terminal's own background.
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<Option<Rgb>>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![None; width * height],
        }
    }

    fn set(&mut self, x: usize, y: usize, rgb: Rgb) {
        if x < self.width && y < self.height {
            self.pixels[y * self.width + x] = Some(rgb);
        }
    }

    /// A straight line from (x0, y0) to (x1, y1) (Bresenham).
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), rgb: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = ((x1 - x0).signum(), (y1 - y0).signum());
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.set(x as usize, y as usize, rgb);
            if (x, y) == (x1, y1) {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text row `row` (pixel rows `2 row` and `2 row + 1`) as coloured half blocks, a colour
    /// given only where it changes.
    fn text_row(&self, row: usize) -> String {
        let mut out = String::new();
        let mut colours = None;
        for x in 0..self.width {
            let at = |y: usize| self.pixels.get(y * self.width + x).copied().flatten();
            let (upper, lower) = (at(2 * row), at(2 * row + 1));
            let (foreground, background, block) = match (upper, lower) {
                (Some(u), l) => (Some(u), l, '▀'),
                (None, Some(l)) => (Some(l), None, '▄'),
                (None, None) => (None, None, ' '),
            };
            if colours != Some((foreground, background)) {
                out.push_str("\x1b[0m");
                out.extend(foreground.map(fg));
                out.extend(background.map(bg));
                colours = Some((foreground, background));
            }
            out.push(block);
        }
        out.push_str("\x1b[0m");
        out
    }
}

fn fg((r, g, b): Rgb) -> String {
    format!("\x1b[38;2;{r};{g};{b}m")
}

fn bg((r, g, b): Rgb) -> String {
    format!("\x1b[48;2;{r};{g};{b}m")
}

/// `chart` in about `width` columns and `rows` text rows (labels included).
pub fn draw(chart: &Chart, width: usize, rows: usize) -> Result<String, String> {
    let (x, y) = match chart {
        Chart::Line { x, y } | Chart::Heat { x, y, .. } => (x, y),
    };
    let (Some(x_range), Some(y_range)) = (x.range(), y.range()) else {
        return Err("\\plot: no x or y values to draw (all null or NaN)".into());
    };
    let y_labels = (y.label(y_range.1), y.label(y_range.0));
    let margin = y_labels.0.chars().count().max(y_labels.1.chars().count()) + 1;
    let plot_width = width.saturating_sub(margin + 1).clamp(10, 200);
    let plot_rows = rows.clamp(4, 60);
    let mut canvas = Canvas::new(plot_width, plot_rows * 2);
    let (title, bar) = match chart {
        Chart::Line { x, y } => {
            line(&mut canvas, x, y, x_range, y_range);
            (format!("{} against {}", y.name, x.name), None)
        }
        Chart::Heat { x, y, value } => {
            let grid = Grid::of(x, y, value, canvas.width, canvas.height);
            let Some(range) = grid.range() else {
                return Err(format!("\\plot: no values of {} to draw", value.name));
            };
            heat(&mut canvas, &grid, range);
            let title = format!("{} over {} and {}", value.name, x.name, y.name);
            (title, Some(colour_bar(value, range, plot_width)))
        }
    };
    let mut out = format!("{title}\n");
    for row in 0..plot_rows {
        let label = match row {
            0 => &y_labels.0,
            r if r == plot_rows - 1 => &y_labels.1,
            _ => "",
        };
        out.push_str(&format!(
            "{label:>w$} {}\n",
            canvas.text_row(row),
            w = margin - 1
        ));
    }
    let (x_lo, x_hi) = (x.label(x_range.0), x.label(x_range.1));
    let gap = plot_width.saturating_sub(x_lo.chars().count() + x_hi.chars().count());
    out.push_str(&format!("{:margin$}{x_lo}{:gap$}{x_hi}\n", "", ""));
    out.push_str(&format!("{:margin$}{:^plot_width$}\n", "", x.name));
    if let Some(bar) = bar {
        out.push_str(&format!("{:margin$}{bar}\n", ""));
    }
    Ok(out)
}

/// y against x: the points in x order, joined.
fn line(canvas: &mut Canvas, x: &Axis, y: &Axis, x_range: (f64, f64), y_range: (f64, f64)) {
    let scale = |v: f64, (lo, hi): (f64, f64), pixels: usize| -> i64 {
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        (t * (pixels - 1) as f64).round() as i64
    };
    let bottom = (canvas.height - 1) as i64;
    let mut last = None;
    for (px, py) in points_in_x_order(x, y) {
        if !py.is_finite() {
            last = None;
            continue;
        }
        let at = (
            scale(px, x_range, canvas.width),
            bottom - scale(py, y_range, canvas.height),
        );
        canvas.line(last.unwrap_or(at), at, LINE);
        last = Some(at);
    }
}

/// The grid's cells stretched over the canvas, the highest y at the top.
fn heat(canvas: &mut Canvas, grid: &Grid, (lo, hi): (f64, f64)) {
    for py in 0..canvas.height {
        let row = (canvas.height - 1 - py) * grid.rows / canvas.height;
        for px in 0..canvas.width {
            let value = grid.at(px * grid.columns / canvas.width, row);
            if value.is_finite() {
                canvas.set(px, py, colour(value, lo, hi));
            }
        }
    }
}

/// `lo ████████ hi`: the colour map from the smallest value to the largest.
fn colour_bar(value: &Axis, (lo, hi): (f64, f64), width: usize) -> String {
    let (lo_label, hi_label) = (value.label(lo), value.label(hi));
    let cells = width
        .saturating_sub(lo_label.chars().count() + hi_label.chars().count() + 2)
        .clamp(4, 40);
    let mut bar = format!("{lo_label} ");
    for i in 0..cells {
        let v = lo + (hi - lo) * i as f64 / (cells - 1) as f64;
        bar.push_str(&format!("{}█", fg(colour(v, lo, hi))));
    }
    bar.push_str(&format!("\x1b[0m {hi_label}"));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(name: &str, values: Vec<f64>) -> Axis {
        Axis {
            name: name.into(),
            values,
            temporal: false,
        }
    }

    #[test]
    fn a_heat_map_has_its_labels_colours_and_bar() {
        let (mut x, mut y, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..4 {
            for j in 0..3 {
                x.push(i as f64);
                y.push(j as f64 * 10.0);
                v.push((i + j) as f64);
            }
        }
        let chart = Chart::Heat {
            x: axis("lon", x),
            y: axis("lat", y),
            value: axis("temp", v),
        };
        let text = draw(&chart, 40, 6).unwrap();
        assert!(text.starts_with("temp over lon and lat\n"), "{text}");
        assert!(text.contains("20 \x1b[0m\x1b[38;2;"), "{text}");
        assert!(
            text.contains("\x1b[38;2;253;231;37m"),
            "the largest value's colour: {text}"
        );
        assert!(
            text.contains("\x1b[38;2;68;1;84m"),
            "the smallest value's colour: {text}"
        );
        assert!(text.contains("lon"));
        assert!(text.contains("0 \x1b[38;2;68;1;84m█"), "colour bar: {text}");
        assert!(text.contains('▀'));
    }

    #[test]
    fn a_line_joins_its_points() {
        let chart = Chart::Line {
            x: axis("day", vec![2.0, 0.0, 1.0]),
            y: axis("t", vec![0.0, 0.0, 5.0]),
        };
        let text = draw(&chart, 30, 4).unwrap();
        assert!(text.starts_with("t against day\n"), "{text}");
        assert!(text.contains("\x1b[38;2;31;119;180m"), "{text}");
        assert_eq!(text.lines().count(), 1 + 4 + 2);
        let empty = Chart::Line {
            x: axis("day", vec![f64::NAN]),
            y: axis("t", vec![1.0]),
        };
        assert!(draw(&empty, 30, 4).is_err());
    }
}
