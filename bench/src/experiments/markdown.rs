//! Markdown building blocks for the experiments' reports: a small [`Table`] builder and
//! number formatting. It knows nothing of any experiment (it imports no other module of this
//! crate); each experiment renders its own report with it (`scale/markdown.rs`,
//! `compare/markdown.rs`, `seed_report.rs`).

/// A markdown table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells render empty, extra ones are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether the table has no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as markdown, with `|` in cells escaped.
    pub fn render(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = (0..self.header.len())
                .map(|i| {
                    cells
                        .get(i)
                        .map_or(String::new(), |c| c.replace('|', "\\|"))
                })
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut s = line(&self.header);
        s.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// `x` with `decimals` decimals, or `–` when unknown.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.decimals$}"))
}

/// An integer with thousands separators: `195,207`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_numbers() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "x|y".into()]);
        t.row(vec!["2".into()]);
        assert_eq!(
            t.render(),
            "| a | b |\n|---|---|\n| 1 | x\\|y |\n| 2 |  |\n"
        );
        assert_eq!(thousands(195_207), "195,207");
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(num(None, 2), "–");
        assert_eq!(num(Some(1.234), 2), "1.23");
    }
}
