//! Result rows printed as the `sqlite3` shell prints them: `-box` (`table`), `-csv -header`,
//! `-json`, `-line`, and `jsonl` (one JSON object per line). Values are rendered as SQLite
//! renders them as text (reals through [`engine::value::real_to_text`]); an empty result
//! prints nothing, as the shell does.
//!
//! Results go to [`result_stdout`]: when the reader closes the pipe (`| head` after its lines),
//! the write fails with a broken pipe, the command stops its scan and ends quietly with status 0
//! for the output it wrote, as `sqlite3` does ([`output_closed`]); other write errors stay one
//! `error:` line.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::query::RowRender;
use engine::value::{real_to_text, Value};

/// Set when a write of results failed because the reader closed the pipe.
static OUTPUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether the reader of the results went away (a write failed with a broken pipe): the error
/// that stopped the command is then that, and the command ends quietly with status 0.
pub fn output_closed() -> bool {
    OUTPUT_CLOSED.load(Ordering::Relaxed)
}

/// A writer whose failures with a broken pipe mark [`output_closed`].
pub struct PipeWatch<W>(W);

impl<W: std::io::Write> PipeWatch<W> {
    fn watch<T>(r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                OUTPUT_CLOSED.store(true, Ordering::Relaxed);
            }
        }
        r
    }
}

impl<W: std::io::Write> std::io::Write for PipeWatch<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Self::watch(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::watch(self.0.flush())
    }
}

/// Standard output for results, buffered, its broken pipe watched ([`output_closed`]).
pub fn result_stdout() -> std::io::BufWriter<PipeWatch<std::io::StdoutLock<'static>>> {
    std::io::BufWriter::with_capacity(64 * 1024, PipeWatch(std::io::stdout().lock()))
}

/// The output options `query` and `sql` share.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output mode, as the sqlite3 shell's -box, -csv -header, -json, -line (jsonl: one JSON
    /// object per line).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also print the I/O report (of each scan, for `sql`) on stderr; as JSON for the JSON
    /// formats.
    #[arg(long)]
    pub report: bool,
}

impl OutputArgs {
    /// Whether reports print as JSON.
    pub fn json(&self) -> bool {
        matches!(self.format, Format::Json | Format::Jsonl)
    }
}

/// An output mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A box-drawn table (`sqlite3 -box`).
    Table,
    /// CSV with a header line (`sqlite3 -csv -header`).
    Csv,
    /// A JSON array of row objects keyed by column name (`sqlite3 -json`).
    Json,
    /// One JSON object per row and line.
    Jsonl,
    /// One `name = value` line per column, rows separated by blank lines (`sqlite3 -line`).
    Line,
}

/// A value as text (NULL is empty; blobs are their bytes, up to a NUL as the shell shows them).
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_to_text(*r),
        Value::Text(t) => String::from_utf8_lossy(t).into_owned(),
        Value::Blob(b) => {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        }
    }
}

/// `rows` with column `names` in `format` (what a [`RowWriter`] writes for them).
#[cfg(test)]
pub fn render(format: Format, names: &[String], rows: &[Vec<Value>]) -> String {
    let mut out = Vec::new();
    let mut w = RowWriter::new(format, names.to_vec(), &mut out);
    for r in rows {
        w.row(r).expect("writing to memory");
    }
    w.finish().expect("writing to memory");
    String::from_utf8(out).expect("the formats write UTF-8")
}

/// Writes result rows one by one as they come, in one output mode: every mode but `table`
/// writes each row at once (the CSV header and JSON's `[` come with the first row, so an
/// empty result prints nothing, as the shell does); `table` must see every row to size its
/// columns, as `sqlite3 -box` does, and writes at [`RowWriter::finish`].
pub struct RowWriter<W: std::io::Write> {
    format: Format,
    names: Vec<String>,
    out: W,
    rows: u64,
    /// The rows of a `table`, kept until the widths are known.
    table: Vec<Vec<Value>>,
    line: String,
}

impl<W: std::io::Write> RowWriter<W> {
    /// A writer of rows with column `names` to `out`.
    pub fn new(format: Format, names: Vec<String>, out: W) -> Self {
        RowWriter {
            format,
            names,
            out,
            rows: 0,
            table: Vec::new(),
            line: String::new(),
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one row.
    pub fn row(&mut self, row: &[Value]) -> std::io::Result<()> {
        if self.format == Format::Table {
            self.rows += 1;
            self.table.push(row.to_vec());
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        render_row(self.format, &self.names, row, &mut line);
        let written = self.rendered(line.as_bytes());
        self.line = line;
        written
    }

    /// Writes one row rendered by [`render_row`] (not for `table`, which needs the values).
    pub fn rendered(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let first = self.rows == 0;
        self.rows += 1;
        match self.format {
            Format::Csv if first => {
                let header: Vec<String> = self.names.iter().map(|c| csv_field(c)).collect();
                self.out.write_all(header.join(",").as_bytes())?;
                self.out.write_all(b"\n")?;
            }
            Format::Json => self.out.write_all(if first { b"[" } else { b",\n" })?,
            Format::Line if !first => self.out.write_all(b"\n")?,
            _ => {}
        }
        self.out.write_all(bytes)
    }

    /// Ends the output (closes the JSON array, writes the table) and flushes it.
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.format {
            Format::Json if self.rows > 0 => self.out.write_all(b"]\n")?,
            Format::Table if !self.table.is_empty() => {
                let text = boxed(&self.names, &self.table);
                self.out.write_all(text.as_bytes())?;
            }
            _ => {}
        }
        self.out.flush()
    }
}

/// One row's text in `format`, without what depends on its place (the CSV header, JSON's
/// `[` and separators, the blank line between `line` records): what the executors render in
/// parallel when a projection streams. Not for `table`.
pub fn render_row(format: Format, names: &[String], row: &[Value], s: &mut String) {
    match format {
        Format::Table => {}
        Format::Csv => {
            for (i, v) in row.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                // NULL is an empty unquoted field; the empty string is quoted.
                if !v.is_null() {
                    s.push_str(&csv_field(&text(v)));
                }
            }
            s.push('\n');
        }
        Format::Json => s.push_str(&json_object(names, row)),
        Format::Jsonl => {
            s.push_str(&json_object(names, row));
            s.push('\n');
        }
        Format::Line => {
            let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            for (n, v) in names.iter().zip(row) {
                let _ = writeln!(s, "{n:>w$} = {}", text(v));
            }
        }
    }
}

/// [`render_row`] as the engine's [`RowRender`], run in the executors' threads.
pub struct FormatRender {
    /// The output mode (not `table`).
    pub format: Format,
    /// The column names.
    pub names: Vec<String>,
}

impl RowRender for FormatRender {
    fn render(&self, row: &[Value], out: &mut Vec<u8>) {
        let mut s = String::new();
        render_row(self.format, &self.names, row, &mut s);
        out.extend_from_slice(s.as_bytes());
    }
}

/// A CSV field as the shell quotes it: when it is empty or holds a control character, a
/// space, `"`, `,` or a non-ASCII byte.
fn csv_field(c: &str) -> String {
    let needs = c
        .bytes()
        .any(|b| b <= 0x20 || b == b'"' || b == b',' || b >= 0x7f);
    if needs {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_object(names: &[String], row: &[Value]) -> String {
    let fields: Vec<String> = names
        .iter()
        .zip(row)
        .map(|(n, v)| {
            let value = match v {
                Value::Null => "null".to_string(),
                Value::Integer(i) => i.to_string(),
                Value::Real(r) if r.is_infinite() => {
                    if *r > 0.0 { "1e999" } else { "-1e999" }.to_string()
                }
                Value::Real(r) => real_to_text(*r),
                other => json_string(&text(other)),
            };
            format!("{}:{value}", json_string(n))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

fn boxed(names: &[String], rows: &[Vec<Value>]) -> String {
    let cells: Vec<Vec<Vec<String>>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| text(v).split('\n').map(str::to_string).collect())
                .collect()
        })
        .collect();
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = names.iter().map(|n| width(n)).collect();
    for r in &cells {
        for (w, c) in widths.iter_mut().zip(r) {
            for l in c {
                *w = (*w).max(width(l));
            }
        }
    }
    let multiline = cells.iter().any(|r| r.iter().any(|c| c.len() > 1));
    let rule = |l: &str, m: &str, r: &str| {
        let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        format!("{l}{}{r}\n", parts.join(m))
    };
    let mut s = rule("┌", "┬", "┐");
    s.push('│');
    for (n, w) in names.iter().zip(&widths) {
        let pad = w - width(n);
        let left = pad / 2;
        let _ = write!(s, " {}{}{} │", " ".repeat(left), n, " ".repeat(pad - left));
    }
    s.push('\n');
    s.push_str(&rule("├", "┼", "┤"));
    for (i, r) in cells.iter().enumerate() {
        if i > 0 && multiline {
            s.push_str(&rule("├", "┼", "┤"));
        }
        let lines = r.iter().map(Vec::len).max().unwrap_or(1);
        for l in 0..lines {
            s.push('│');
            for (c, w) in r.iter().zip(&widths) {
                let t = c.get(l).map_or("", String::as_str);
                let _ = write!(s, " {}{} │", t, " ".repeat(w - width(t)));
            }
            s.push('\n');
        }
    }
    s.push_str(&rule("└", "┴", "┘"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_match_the_shell() {
        let names = vec!["a".to_string(), "b".to_string()];
        let rows = vec![
            vec![Value::Integer(1), Value::text("x\"y")],
            vec![Value::Null, Value::text("a,b")],
        ];
        assert_eq!(
            render(Format::Csv, &names, &rows),
            "a,b\n1,\"x\"\"y\"\n,\"a,b\"\n"
        );
        assert_eq!(
            render(Format::Json, &names, &rows),
            "[{\"a\":1,\"b\":\"x\\\"y\"},\n{\"a\":null,\"b\":\"a,b\"}]\n"
        );
        assert_eq!(
            render(Format::Line, &names, &rows),
            "a = 1\nb = x\"y\n\na = \nb = a,b\n"
        );
        assert_eq!(
            render(Format::Table, &names, &rows),
            "┌───┬─────┐\n│ a │  b  │\n├───┼─────┤\n│ 1 │ x\"y │\n│   │ a,b │\n└───┴─────┘\n"
        );
        assert_eq!(render(Format::Json, &names, &[]), "");
        assert_eq!(render(Format::Csv, &names, &[]), "");
        assert_eq!(
            render(Format::Jsonl, &names, &rows),
            "{\"a\":1,\"b\":\"x\\\"y\"}\n{\"a\":null,\"b\":\"a,b\"}\n"
        );
    }
}
