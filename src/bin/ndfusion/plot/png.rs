//! A chart written as a PNG with plotters: axes labelled with the columns' names, a heat map's
//! cells at their x and y values with a colour bar beside them. Text is drawn with DejaVu
//! Sans, compiled in (no system fonts are looked up).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::{colour, points_in_x_order, Axis, Chart, Grid, LINE};

/// The picture's size in pixels.
const SIZE: (u32, u32) = (1000, 640);
/// The colour bar's share of the width.
const BAR_WIDTH: u32 = 130;
/// The axes' labels and names.
const LABELS: (&str, u32) = ("sans-serif", 14);
const NAMES: (&str, u32) = ("sans-serif", 16);
/// The heat map's cells at most (x, y): about a pixel each.
const MAX_CELLS: (usize, usize) = (800, 540);

/// Registers the font the first time a picture is drawn.
fn font() -> Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    ok.then_some(())
        .ok_or_else(|| "\\plot: the built-in font did not load".to_string())
}

/// Writes `chart` to `path` as a PNG: to a file beside it first, renamed into place when
/// whole, so a failed write leaves what was there.
pub fn write_png(chart: &Chart, path: &Path) -> Result<(), String> {
    font()?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let partial = path.with_file_name(format!(".{}.partial.png", name.unwrap_or_default()));
    let drawn = draw(chart, &partial).map_err(|e| format!("\\plot {}: {e}", path.display()));
    if let Err(e) = drawn {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        format!("\\plot {}: {e}", path.display())
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(chart: &Chart, path: &Path) -> DrawResult {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    match chart {
        Chart::Line { x, y } => line(&root, x, y)?,
        Chart::Heat { x, y, value } => {
            let (main, bar) = root.split_horizontally(SIZE.0 - BAR_WIDTH);
            let grid = Grid::of(x, y, value, MAX_CELLS.0, MAX_CELLS.1);
            let range = grid.range().ok_or("no values to draw")?;
            heat(&main, x, y, value, &grid, range)?;
            colour_bar(&bar, value, range)?;
        }
    }
    root.present()?;
    Ok(())
}

/// An axis range that is never empty.
fn span(axis: &Axis) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let (lo, hi) = axis.range().ok_or(format!("no values of {}", axis.name))?;
    Ok(if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    })
}

fn rgb((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

/// A chart's frame on `area`: its title, x and y over their ranges with the axes' names and
/// labels, grid lines when `mesh`.
fn frame<'a, DB: DrawingBackend + 'a>(
    area: &'a DrawingArea<DB, Shift>,
    title: String,
    (x, (x0, x1)): (&Axis, (f64, f64)),
    (y, (y0, y1)): (&Axis, (f64, f64)),
    mesh: bool,
) -> Result<Frame<'a, DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let mut style = chart.configure_mesh();
    if !mesh {
        style.disable_mesh();
    }
    style
        .x_desc(x.name.as_str())
        .y_desc(y.name.as_str())
        .x_label_formatter(&|v| x.label(*v))
        .y_label_formatter(&|v| y.label(*v))
        .label_style(LABELS)
        .axis_desc_style(NAMES)
        .draw()?;
    Ok(chart)
}

/// A chart drawn in data coordinates.
type Frame<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn line<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, x: &Axis, y: &Axis) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let ((x0, x1), (y0, y1)) = (span(x)?, span(y)?);
    // Room above and below the line, so its extremes are not on the frame.
    let pad = (y1 - y0) * 0.05;
    let (y0, y1) = (y0 - pad, y1 + pad);
    let title = format!("{} against {}", y.name, x.name);
    let mut chart = frame(area, title, (x, (x0, x1)), (y, (y0, y1)), true)?;
    // A null or NaN y breaks the line.
    for run in points_in_x_order(x, y).split(|(_, y)| !y.is_finite()) {
        chart.draw_series(LineSeries::new(
            run.iter().copied(),
            rgb(LINE).stroke_width(2),
        ))?;
    }
    Ok(())
}

fn heat<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: &Axis,
    y: &Axis,
    value: &Axis,
    grid: &Grid,
    (lo, hi): (f64, f64),
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (x0, x1) = (grid.x_edges[0], grid.x_edges[grid.columns]);
    let (y0, y1) = (grid.y_edges[0], grid.y_edges[grid.rows]);
    let title = format!("{} over {} and {}", value.name, x.name, y.name);
    let mut chart = frame(area, title, (x, (x0, x1)), (y, (y0, y1)), false)?;
    let cells = (0..grid.rows).flat_map(|row| (0..grid.columns).map(move |column| (column, row)));
    chart.draw_series(cells.filter_map(|(column, row)| {
        let v = grid.at(column, row);
        v.is_finite().then(|| {
            let corners = [
                (grid.x_edges[column], grid.y_edges[row]),
                (grid.x_edges[column + 1], grid.y_edges[row + 1]),
            ];
            Rectangle::new(corners, rgb(colour(v, lo, hi)).filled())
        })
    }))?;
    Ok(())
}

fn colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    value: &Axis,
    (lo, hi): (f64, f64),
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (y0, y1) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    let mut bar = ChartBuilder::on(area)
        .margin_top(54)
        .margin_bottom(64)
        .margin_right(8)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..1.0, y0..y1)?;
    bar.configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_desc(value.name.as_str())
        .y_label_formatter(&|v| value.label(*v))
        .label_style(LABELS)
        .axis_desc_style(NAMES)
        .draw()?;
    const STEPS: usize = 128;
    let step = (y1 - y0) / STEPS as f64;
    bar.draw_series((0..STEPS).map(|i| {
        let v = y0 + step * i as f64;
        let corners = [(0.0, v), (1.0, v + step)];
        Rectangle::new(corners, rgb(colour(v + step / 2.0, lo, hi)).filled())
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heat_map_is_written_whole_and_alone() {
        let (mut x, mut y, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..20 {
            for j in 0..10 {
                x.push(i as f64);
                y.push(j as f64);
                v.push((i * j) as f64);
            }
        }
        let axis = |name: &str, values| Axis {
            name: name.into(),
            values,
            temporal: false,
        };
        let chart = Chart::Heat {
            x: axis("lon", x),
            y: axis("lat", y),
            value: axis("temp", v),
        };
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("heat.png");
        write_png(&chart, &path).unwrap();
        // A PNG (decoded and its colours checked by the integration tests).
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        // Nothing but the picture is left in the folder.
        assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 1);
        // A folder that is not there: an error naming the file.
        let missing = folder.path().join("no/such/folder/heat.png");
        let error = write_png(&chart, &missing).unwrap_err();
        assert!(error.contains("no/such/folder/heat.png"), "{error}");
    }
}
