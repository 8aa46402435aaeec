//! `\plot`: a quick look at a result. Two columns (x, y) are a line chart; three (x, y,
//! value) a heat map, the gridded field users look at first. Drawn in the terminal with
//! Unicode half blocks in 24-bit colour (`terminal.rs`) or written as a PNG (`png.rs`).
//!
//! Both draw the same [`Chart`]: the columns as numbers (times as seconds since 1970), and
//! for a heat map the values averaged onto a grid of at most as many cells as the picture
//! has pixels, cells following the distinct x and y values (an irregular or descending
//! axis, as latitudes often are, keeps one cell per value).

mod png;
mod terminal;

pub use png::write_png;
pub use terminal::draw;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, SchemaRef, TimeUnit};

/// Rows a plot reads at most: beyond it, aggregate first.
pub const MAX_ROWS: usize = 10_000_000;

/// One column of a plot, as numbers.
pub struct Axis {
    pub name: String,
    /// The values, NaN for nulls; times as seconds since 1970-01-01.
    pub values: Vec<f64>,
    /// Whether the values are times (labels are dates).
    pub temporal: bool,
}

impl Axis {
    /// The smallest and largest values that are numbers; `None` when there are none.
    pub fn range(&self) -> Option<(f64, f64)> {
        finite_range(&self.values)
    }

    /// `value` as the axis labels it: a date for times, else a short number.
    pub fn label(&self, value: f64) -> String {
        if self.temporal {
            let time = chrono::DateTime::from_timestamp(value as i64, 0);
            return time.map_or_else(|| format!("{value}"), |t| t.format("%Y-%m-%d").to_string());
        }
        number(value)
    }
}

/// `value` in at most about 8 characters.
pub fn number(value: f64) -> String {
    let magnitude = value.abs();
    if value != 0.0 && !(1e-3..1e6).contains(&magnitude) {
        return format!("{value:.2e}");
    }
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "-0" => "0".to_string(),
        t => t.to_string(),
    }
}

/// What a result is drawn as.
pub enum Chart {
    /// y against x, points joined in x order.
    Line { x: Axis, y: Axis },
    /// value over x and y.
    Heat { x: Axis, y: Axis, value: Axis },
}

impl Chart {
    /// The chart of a result of two or three columns, or why there is none.
    pub fn of(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Chart, String> {
        let columns = schema.fields().len();
        let axis = |i: usize| axis(schema.field(i).name(), batches, i);
        match columns {
            2 => Ok(Chart::Line {
                x: axis(0)?,
                y: axis(1)?,
            }),
            3 => Ok(Chart::Heat {
                x: axis(0)?,
                y: axis(1)?,
                value: axis(2)?,
            }),
            n => Err(format!(
                "\\plot draws 2 columns (x, y: a line) or 3 (x, y, value: a heat map); \
                 the result has {n}"
            )),
        }
    }
}

/// The (x, y) points of a line, in x order; those without an x left out.
pub fn points_in_x_order(x: &Axis, y: &Axis) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = (x.values.iter().copied())
        .zip(y.values.iter().copied())
        .filter(|(x, _)| x.is_finite())
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// Column `index` of `batches` as numbers.
fn axis(name: &str, batches: &[RecordBatch], index: usize) -> Result<Axis, String> {
    let mut values = Vec::with_capacity(batches.iter().map(|b| b.num_rows()).sum());
    let mut temporal = false;
    for batch in batches {
        let column = batch.column(index);
        // Times as integers in their unit first, then all as float64, scaled to seconds.
        let (integers, scale) = match column.data_type() {
            DataType::Timestamp(unit, _) => {
                let per_second = match unit {
                    TimeUnit::Second => 1.0,
                    TimeUnit::Millisecond => 1e3,
                    TimeUnit::Microsecond => 1e6,
                    TimeUnit::Nanosecond => 1e9,
                };
                (Some(DataType::Int64), 1.0 / per_second)
            }
            DataType::Date32 => (Some(DataType::Int32), 86_400.0),
            DataType::Date64 => (Some(DataType::Int64), 1e-3),
            t if t.is_numeric() || t == &DataType::Boolean => (None, 1.0),
            other => {
                return Err(format!(
                    "\\plot: column {name} is {other}, not numbers or times"
                ))
            }
        };
        temporal |= integers.is_some();
        let numbers = match &integers {
            Some(integer) => cast(column, integer).and_then(|i| cast(&i, &DataType::Float64)),
            None => cast(column, &DataType::Float64),
        };
        let numbers = numbers.map_err(|e| format!("\\plot: column {name}: {e}"))?;
        let numbers = numbers.as_primitive::<Float64Type>();
        values.extend((0..numbers.len()).map(|i| match numbers.is_null(i) {
            true => f64::NAN,
            false => numbers.value(i) * scale,
        }));
    }
    Ok(Axis {
        name: name.to_string(),
        values,
        temporal,
    })
}

/// A heat map's values averaged onto cells: `columns` x `rows`, row 0 the lowest y.
pub struct Grid {
    /// Where each column of cells starts and ends along x (`columns + 1` edges, ascending).
    pub x_edges: Vec<f64>,
    /// The same along y (`rows + 1`).
    pub y_edges: Vec<f64>,
    /// Mean value of each cell, row by row; NaN where no value fell.
    pub cells: Vec<f64>,
    pub columns: usize,
    pub rows: usize,
}

impl Grid {
    /// The values of `value` over `x` and `y`, at most `max_columns` x `max_rows` cells: one
    /// per distinct x and y value while they fit, runs of neighbouring values otherwise.
    pub fn of(x: &Axis, y: &Axis, value: &Axis, max_columns: usize, max_rows: usize) -> Grid {
        let (xs, x_edges) = bins(&x.values, max_columns.max(1));
        let (ys, y_edges) = bins(&y.values, max_rows.max(1));
        let (columns, rows) = (
            x_edges.len().saturating_sub(1),
            y_edges.len().saturating_sub(1),
        );
        let mut sums = vec![0.0; columns * rows];
        let mut counts = vec![0u32; columns * rows];
        for ((&cx, &cy), &v) in xs.iter().zip(&ys).zip(&value.values) {
            if let (Some(cx), Some(cy), true) = (cx, cy, v.is_finite()) {
                sums[cy * columns + cx] += v;
                counts[cy * columns + cx] += 1;
            }
        }
        let cells = (sums.iter().zip(&counts))
            .map(|(s, &n)| if n == 0 { f64::NAN } else { s / n as f64 })
            .collect();
        Grid {
            x_edges,
            y_edges,
            cells,
            columns,
            rows,
        }
    }

    /// The mean in cell (`column`, `row`), NaN when empty.
    pub fn at(&self, column: usize, row: usize) -> f64 {
        self.cells[row * self.columns + column]
    }

    /// The smallest and largest cell values.
    pub fn range(&self) -> Option<(f64, f64)> {
        finite_range(&self.cells)
    }
}

/// The smallest and largest of `values` that are numbers; `None` when none is.
fn finite_range(values: &[f64]) -> Option<(f64, f64)> {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    finite.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Each value's bin (`None` for NaN) and the bins' edges: the distinct values sorted, one bin
/// each while at most `max_bins`, else `max_bins` runs of neighbours; edges half way between
/// neighbouring values.
fn bins(values: &[f64], max_bins: usize) -> (Vec<Option<usize>>, Vec<f64>) {
    let mut distinct: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let n = distinct.len();
    if n == 0 {
        return (vec![None; values.len()], Vec::new());
    }
    let bin_count = n.min(max_bins);
    // Distinct value i falls in bin i * bin_count / n.
    let bin_of = |i: usize| i * bin_count / n;
    let mid = |i: usize| (distinct[i - 1] + distinct[i]) / 2.0;
    let half = if n > 1 {
        (distinct[1] - distinct[0]) / 2.0
    } else {
        0.5
    };
    let last_half = if n > 1 {
        (distinct[n - 1] - distinct[n - 2]) / 2.0
    } else {
        0.5
    };
    let mut edges = vec![distinct[0] - half];
    for i in 1..n {
        if bin_of(i) != bin_of(i - 1) {
            edges.push(mid(i));
        }
    }
    edges.push(distinct[n - 1] + last_half);
    let assigned = values
        .iter()
        .map(|v| {
            let i = distinct.binary_search_by(|d| d.total_cmp(v)).ok()?;
            Some(bin_of(i))
        })
        .collect();
    (assigned, edges)
}

/// Viridis at 0, 1/8, ..., 1: a colour map that reads in grey and to most colour-blind eyes.
const VIRIDIS: [(u8, u8, u8); 9] = [
    (0x44, 0x01, 0x54),
    (0x47, 0x2d, 0x7b),
    (0x3b, 0x52, 0x8b),
    (0x2c, 0x72, 0x8e),
    (0x21, 0x91, 0x8c),
    (0x28, 0xae, 0x80),
    (0x5e, 0xc9, 0x62),
    (0xad, 0xdc, 0x30),
    (0xfd, 0xe7, 0x25),
];

/// The colour of `value` between `lo` and `hi`.
pub fn colour(value: f64, lo: f64, hi: f64) -> (u8, u8, u8) {
    let t = if hi > lo {
        ((value - lo) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        0.5
    };
    let at = t * (VIRIDIS.len() - 1) as f64;
    let (i, f) = (at.floor() as usize, at.fract());
    let (a, b) = (VIRIDIS[i], VIRIDIS[(i + 1).min(VIRIDIS.len() - 1)]);
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The colour lines are drawn in.
pub const LINE: (u8, u8, u8) = (0x1f, 0x77, 0xb4);

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(values: &[f64]) -> Axis {
        Axis {
            name: "a".into(),
            values: values.to_vec(),
            temporal: false,
        }
    }

    #[test]
    fn a_descending_irregular_axis_keeps_a_cell_per_value() {
        let (bins_of, edges) = bins(&[25.0, 15.0, 5.0, 15.0, f64::NAN], 10);
        assert_eq!(bins_of, [Some(2), Some(1), Some(0), Some(1), None]);
        assert_eq!(edges, [0.0, 10.0, 20.0, 30.0]);
        // Ten values in four bins: runs of neighbours.
        let values: Vec<f64> = (0..10).map(f64::from).collect();
        let (bins_of, edges) = bins(&values, 4);
        assert_eq!(edges.len(), 5);
        assert_eq!(bins_of[0], Some(0));
        assert_eq!(bins_of[9], Some(3));
    }

    #[test]
    fn a_grid_averages_what_falls_in_a_cell() {
        let x = axis(&[0.0, 1.0, 0.0, 1.0, 1.0]);
        let y = axis(&[0.0, 0.0, 1.0, 1.0, 1.0]);
        let v = axis(&[1.0, 2.0, 3.0, 4.0, 6.0]);
        let grid = Grid::of(&x, &y, &v, 100, 100);
        assert_eq!((grid.columns, grid.rows), (2, 2));
        assert_eq!(grid.at(0, 0), 1.0);
        assert_eq!(grid.at(1, 1), 5.0);
        assert_eq!(grid.range(), Some((1.0, 5.0)));
    }

    #[test]
    fn colours_and_labels() {
        assert_eq!(colour(0.0, 0.0, 1.0), VIRIDIS[0]);
        assert_eq!(colour(1.0, 0.0, 1.0), VIRIDIS[8]);
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(-0.0001), "-1.00e-4");
        assert_eq!(number(3.0), "3");
    }
}
