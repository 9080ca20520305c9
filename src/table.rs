//! `Table`: aligned text columns, shared by the device status (`print.rs`) and the model listing
//! (`models.rs`); a leaf, so neither depends on the other.

use std::fmt::Write;

/// Rows of cells printed with every column padded to its widest cell (the last column is not padded).
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Table { rows: Vec::new() }
    }

    /// Adds a row.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Appends the rows to `s`, each line starting with `indent`.
    pub(crate) fn write(&self, s: &mut String, indent: &str) {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|x| x.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &self.rows {
            let mut line = String::from(indent);
            for (c, cell) in r.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if c + 1 < r.len() {
                    let pad = widths[c].saturating_sub(cell.chars().count());
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
        }
    }
}
