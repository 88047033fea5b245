//! Result rows printed as the `sqlite3` shell prints them: `-box` (`table`), `-csv -header`,
//! `-json`, `-line`, and `jsonl` (one JSON object per line). Values are rendered as SQLite
//! renders them as text (reals through [`engine::value::real_to_text`]); an empty result
//! prints nothing, as the shell does.
//!
//! Results go to [`result_stdout`]: when the reader closes the pipe (`| head` after its lines),
//! the write fails with a broken pipe, the command stops its scan and ends quietly with status 0
//! for the output it wrote, as `sqlite3` does ([`output_closed`]); other write errors stay one
//! `error:` line.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::query::RowRender;
use engine::value::{push_real_text, Value, ValueRef};

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

/// Appends a value as text (NULL is empty; texts and blobs are their bytes up to the first
/// NUL, as the shell shows them, reading C strings; bytes that are not UTF-8 replaced, as
/// `String::from_utf8_lossy` does).
fn push_text(out: &mut Vec<u8>, v: ValueRef<'_>) {
    push_text_as(out, v, Bytes::Utf8);
}

/// What [`push_text_as`] does with text that is not UTF-8.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bytes {
    /// Writes its bytes as they are, as the shell's CSV and line modes do.
    Raw,
    /// Replaces them ([`push_lossy`]): JSON and the box table must be UTF-8.
    Utf8,
}

/// [`push_text`], with text (and a blob's bytes) that is not UTF-8 written as `bytes` says.
fn push_text_as(out: &mut Vec<u8>, v: ValueRef<'_>, bytes: Bytes) {
    let text = |out: &mut Vec<u8>, t: &[u8]| match bytes {
        Bytes::Raw => out.extend_from_slice(t),
        Bytes::Utf8 => push_lossy(out, t),
    };
    match v {
        ValueRef::Null => {}
        ValueRef::Integer(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
        ValueRef::Real(r) => push_real_text(r, out),
        ValueRef::Text(b) | ValueRef::Blob(b) => {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            text(out, &b[..end]);
        }
    }
}

/// Appends `bytes` as UTF-8: as they are when they are, else with replacement characters.
fn push_lossy(out: &mut Vec<u8>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(_) => out.extend_from_slice(bytes),
        Err(_) => out.extend_from_slice(String::from_utf8_lossy(bytes).as_bytes()),
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
    format: FormatRender,
    out: W,
    rows: u64,
    /// The rows of a `table`, kept until the widths are known.
    table: Vec<Vec<Value>>,
    line: Vec<u8>,
}

impl<W: std::io::Write> RowWriter<W> {
    /// A writer of rows with column `names` to `out`.
    pub fn new(format: Format, names: Vec<String>, out: W) -> Self {
        RowWriter {
            format: FormatRender::new(format, names),
            out,
            rows: 0,
            table: Vec::new(),
            line: Vec::new(),
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one row.
    pub fn row(&mut self, row: &[Value]) -> std::io::Result<()> {
        if self.format.format == Format::Table {
            self.rows += 1;
            self.table.push(row.to_vec());
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let refs: Vec<ValueRef<'_>> = row.iter().map(Value::as_ref).collect();
        self.format.write_row(&refs, &mut line);
        let written = self.rendered(&line);
        self.line = line;
        written
    }

    /// Writes one row rendered by [`FormatRender`] (not for `table`, which needs the values).
    pub fn rendered(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let first = self.rows == 0;
        self.rows += 1;
        match self.format.format {
            Format::Csv if first => {
                let mut header = Vec::new();
                for (i, name) in self.format.names.iter().enumerate() {
                    if i > 0 {
                        header.push(b',');
                    }
                    csv_field(&mut header, name.as_bytes());
                }
                header.push(b'\n');
                self.out.write_all(&header)?;
            }
            Format::Json => self.out.write_all(if first { b"[" } else { b",\n" })?,
            Format::Line if !first => self.out.write_all(b"\n")?,
            _ => {}
        }
        self.out.write_all(bytes)
    }

    /// Ends the output (closes the JSON array, writes the table) and flushes it.
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.format.format {
            Format::Json if self.rows > 0 => self.out.write_all(b"]\n")?,
            Format::Table if !self.table.is_empty() => {
                boxed(&mut self.out, &self.format.names, &self.table)?;
            }
            _ => {}
        }
        self.out.flush()
    }
}

/// How the rows of a result are rendered in one output mode, without what depends on a row's
/// place (the CSV header, JSON's `[` and separators, the blank line between `line` records):
/// what the executors run in parallel when a projection streams ([`RowRender`]), writing
/// straight from the values borrowed from the pages. Not for `table`.
pub struct FormatRender {
    format: Format,
    names: Vec<String>,
    /// Per column, what comes before its value: `"name":` for JSON, the right-aligned
    /// `name = ` for `line`.
    prefixes: Vec<Vec<u8>>,
}

impl FormatRender {
    /// The rendering of rows with column `names` in `format`.
    pub fn new(format: Format, names: Vec<String>) -> Self {
        // The shell's line mode right-aligns the names to the longest, and to at least 5.
        let width = names
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        let prefixes = names
            .iter()
            .map(|n| match format {
                Format::Json | Format::Jsonl => {
                    let mut key = Vec::new();
                    json_string(&mut key, n.as_bytes());
                    key.push(b':');
                    key
                }
                Format::Line => format!("{n:>width$} = ").into_bytes(),
                Format::Csv | Format::Table => Vec::new(),
            })
            .collect();
        FormatRender {
            format,
            names,
            prefixes,
        }
    }

    /// Appends one row's bytes to `out`.
    pub fn write_row(&self, row: &[ValueRef<'_>], out: &mut Vec<u8>) {
        match self.format {
            Format::Table => {}
            Format::Csv => {
                for (i, &v) in row.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match v {
                        // NULL is an empty unquoted field; the empty string is quoted.
                        ValueRef::Null => {}
                        ValueRef::Integer(_) | ValueRef::Real(_) => push_text(out, v),
                        // Printable ASCII without `"` or `,` (most text): as it is, unquoted.
                        ValueRef::Text(t) if !t.is_empty() && t.iter().all(|&b| csv_plain(b)) => {
                            out.extend_from_slice(t)
                        }
                        ValueRef::Text(_) | ValueRef::Blob(_) => {
                            let start = out.len();
                            push_text_as(out, v, Bytes::Raw);
                            quote_csv_from(out, start);
                        }
                    }
                }
                out.push(b'\n');
            }
            Format::Json | Format::Jsonl => {
                out.push(b'{');
                for (i, (&v, key)) in row.iter().zip(&self.prefixes).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(key);
                    match v {
                        ValueRef::Null => out.extend_from_slice(b"null"),
                        ValueRef::Real(r) if r.is_infinite() => {
                            out.extend_from_slice(if r > 0.0 { b"1e999" } else { b"-1e999" })
                        }
                        ValueRef::Integer(_) | ValueRef::Real(_) => push_text(out, v),
                        ValueRef::Text(_) | ValueRef::Blob(_) => {
                            let mut t = Vec::new();
                            push_text(&mut t, v);
                            json_string(out, &t);
                        }
                    }
                }
                out.push(b'}');
                if self.format == Format::Jsonl {
                    out.push(b'\n');
                }
            }
            Format::Line => {
                for (&v, prefix) in row.iter().zip(&self.prefixes) {
                    out.extend_from_slice(prefix);
                    push_text_as(out, v, Bytes::Raw);
                    out.push(b'\n');
                }
            }
        }
    }
}

impl RowRender for FormatRender {
    fn render(&self, row: &[ValueRef<'_>], out: &mut Vec<u8>) {
        self.write_row(row, out);
    }
}

/// Whether the shell quotes a CSV field: when it is empty or holds a byte that is not
/// [`csv_plain`].
fn csv_needs_quotes(field: &[u8]) -> bool {
    field.is_empty() || !field.iter().all(|&b| csv_plain(b))
}

/// A byte the shell leaves unquoted in a CSV field: printable ASCII but `"` and `,` (not a
/// control character, a space or a non-ASCII byte).
fn csv_plain(b: u8) -> bool {
    b > 0x20 && b < 0x7f && b != b'"' && b != b','
}

/// Quotes the field written to `out` from `start` on, as the shell does ([`csv_needs_quotes`]:
/// in double quotes, each `"` doubled).
fn quote_csv_from(out: &mut Vec<u8>, start: usize) {
    if !csv_needs_quotes(&out[start..]) {
        return;
    }
    if !out[start..].contains(&b'"') {
        out.insert(start, b'"');
        out.push(b'"');
        return;
    }
    let field = out.split_off(start);
    csv_field(out, &field);
}

/// Appends `field` as a CSV field, quoted as the shell quotes it ([`csv_needs_quotes`]).
fn csv_field(out: &mut Vec<u8>, field: &[u8]) {
    if !csv_needs_quotes(field) {
        out.extend_from_slice(field);
        return;
    }
    out.push(b'"');
    for &b in field {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// Appends UTF-8 text `s` as a JSON string.
fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 => {
                let _ = write!(out, "\\u{b:04x}");
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// Writes `rows` as `sqlite3 -box` draws them: a first pass over the values finds each
/// column's width, the second writes row by row (no cell's text is kept: a table of millions
/// of rows holds only its values).
fn boxed(
    out: &mut impl std::io::Write,
    names: &[String],
    rows: &[Vec<Value>],
) -> std::io::Result<()> {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = names.iter().map(|n| width(n)).collect();
    let mut multiline = false;
    let mut cell = String::new();
    let text_of = |v: &Value, cell: &mut String| {
        cell.clear();
        let mut bytes = std::mem::take(cell).into_bytes();
        push_text(&mut bytes, v.as_ref());
        *cell = String::from_utf8(bytes).unwrap_or_default();
    };
    for r in rows {
        for (w, v) in widths.iter_mut().zip(r) {
            text_of(v, &mut cell);
            for (i, l) in cell.split('\n').enumerate() {
                multiline |= i > 0;
                *w = (*w).max(width(l));
            }
        }
    }
    let rule = |l: &str, m: &str, r: &str| {
        let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        format!("{l}{}{r}\n", parts.join(m))
    };
    let middle = rule("├", "┼", "┤");
    let mut s = rule("┌", "┬", "┐");
    s.push('│');
    for (n, w) in names.iter().zip(&widths) {
        let pad = w - width(n);
        let left = pad / 2;
        let _ = write!(s, " {}{}{} │", " ".repeat(left), n, " ".repeat(pad - left));
    }
    s.push('\n');
    s.push_str(&middle);
    out.write_all(s.as_bytes())?;
    let mut cells: Vec<String> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && multiline {
            out.write_all(middle.as_bytes())?;
        }
        cells.resize(r.len(), String::new());
        for (c, v) in cells.iter_mut().zip(r) {
            text_of(v, c);
        }
        let lines = cells
            .iter()
            .map(|c| c.split('\n').count())
            .max()
            .unwrap_or(1);
        s.clear();
        for l in 0..lines {
            s.push('│');
            for (c, w) in cells.iter().zip(&widths) {
                let t = c.split('\n').nth(l).unwrap_or("");
                let _ = write!(s, " {}{} │", t, " ".repeat(w - width(t)));
            }
            s.push('\n');
        }
        out.write_all(s.as_bytes())?;
    }
    out.write_all(rule("└", "┴", "┘").as_bytes())
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
            "    a = 1\n    b = x\"y\n\n    a = \n    b = a,b\n"
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

    #[test]
    fn text_is_quoted_and_escaped_as_the_shell_does() {
        let names = vec!["v".to_string()];
        let rows = vec![
            vec![Value::text("\u{e9}\"")],
            vec![Value::Blob(b"ab\0cd".to_vec())],
            vec![Value::text("")],
            vec![Value::text("a\u{1}b\n")],
            vec![Value::Real(0.1)],
            vec![Value::Real(0.1)],
            vec![Value::Integer(-7)],
        ];
        assert_eq!(
            render(Format::Csv, &names, &rows),
            "v\n\"\u{e9}\"\"\"\nab\n\"\"\n\"a\u{1}b\n\"\n0.1\n0.1\n-7\n"
        );
        assert_eq!(
            render(Format::Jsonl, &names, &rows[2..4]),
            "{\"v\":\"\"}\n{\"v\":\"a\\u0001b\\n\"}\n"
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_written_raw_in_csv_and_line_as_the_shell_does() {
        let names = vec!["v".to_string()];
        let row = [Value::Text(b"a\xff".to_vec())];
        let bytes = |format| {
            let mut out = Vec::new();
            let mut w = RowWriter::new(format, names.clone(), &mut out);
            w.row(&row).expect("writing to memory");
            w.finish().expect("writing to memory");
            out
        };
        assert_eq!(bytes(Format::Csv), b"v\n\"a\xff\"\n");
        assert_eq!(bytes(Format::Line), b"    v = a\xff\n");
        // JSON must be UTF-8: the byte is replaced.
        assert_eq!(bytes(Format::Jsonl), "{\"v\":\"a\u{fffd}\"}\n".as_bytes());
    }

    #[test]
    fn text_ends_at_its_first_nul_as_the_shell_shows_it() {
        // The shell reads values as C strings: `'ab' || char(0) || 'cd'` shows as `ab` in
        // every mode (its CSV unquoted, as any plain text).
        let names = vec!["v".to_string(), "w".to_string()];
        let rows = vec![vec![Value::text("ab\0cd"), Value::text("x")]];
        assert_eq!(render(Format::Csv, &names, &rows), "v,w\nab,x\n");
        assert_eq!(
            render(Format::Jsonl, &names, &rows),
            "{\"v\":\"ab\",\"w\":\"x\"}\n"
        );
        assert_eq!(
            render(Format::Line, &names, &rows),
            "    v = ab\n    w = x\n"
        );
        assert!(render(Format::Table, &names, &rows).contains("│ ab │ x │"));
    }
}
