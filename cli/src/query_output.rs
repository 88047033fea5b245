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
    table: TableCells,
    /// Threads that measure and draw a `table` ([`RowWriter::drawing_threads`]); `None`:
    /// every CPU, asked for only when a table is drawn (`available_parallelism` reads the
    /// cgroup's files).
    threads: Option<usize>,
    line: Vec<u8>,
}

impl<W: std::io::Write> RowWriter<W> {
    /// A writer of rows with column `names` to `out`.
    pub fn new(format: Format, names: Vec<String>, out: W) -> Self {
        RowWriter {
            format: FormatRender::new(format, names),
            out,
            rows: 0,
            table: TableCells::default(),
            threads: None,
            line: Vec::new(),
        }
    }

    /// Measures and draws a `table` on `threads` threads (at least one): the query's
    /// executors, so that `--cores 1` draws on one CPU as it scans on one. Every CPU the
    /// machine has by default.
    pub fn drawing_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.max(1));
        self
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one row.
    pub fn row(&mut self, row: &[Value]) -> std::io::Result<()> {
        let refs: Vec<ValueRef<'_>> = row.iter().map(Value::as_ref).collect();
        if self.format.format == Format::Table {
            self.rows += 1;
            self.format.write_row(&refs, self.table.next_row());
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        self.format.write_row(&refs, &mut line);
        let written = self.rendered(&line);
        self.line = line;
        written
    }

    /// Writes one row rendered by [`FormatRender`] (for `table`, keeps its cells).
    pub fn rendered(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let first = self.rows == 0;
        self.rows += 1;
        match self.format.format {
            Format::Table => {
                self.table.next_row().extend_from_slice(bytes);
                return Ok(());
            }
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
            Format::Table if self.rows > 0 => {
                let threads = self
                    .threads
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
                boxed(&mut self.out, &self.format.names, &self.table, threads)?;
            }
            _ => {}
        }
        self.out.flush()
    }
}

/// How the rows of a result are rendered in one output mode, without what depends on a row's
/// place (the CSV header, JSON's `[` and separators, the blank line between `line` records):
/// what the executors run in parallel when a projection streams ([`RowRender`]), writing
/// straight from the values borrowed from the pages. For `table`, a row's cells as
/// [`TableCells`] keeps them: the box is drawn when every row is in.
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
            Format::Table => {
                for &v in row {
                    push_text(out, v);
                    out.push(0);
                }
            }
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
                        ValueRef::Text(b) | ValueRef::Blob(b) => {
                            // As `push_text` shows it (up to the first NUL, UTF-8), escaped
                            // straight from the page: no copy unless it is not UTF-8.
                            let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                            match std::str::from_utf8(b) {
                                Ok(_) => json_string(out, b),
                                Err(_) => json_string(out, String::from_utf8_lossy(b).as_bytes()),
                            }
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

/// Appends UTF-8 text `s` as a JSON string: the runs of bytes that need no escape copied
/// whole, the rest (`"`, `\\` and control characters) escaped as the shell's JSON mode does.
fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    /// Whether a byte is written escaped.
    const fn escaped(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\'
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut rest = s;
    while let Some(at) = rest.iter().position(|&b| escaped(b)) {
        out.extend_from_slice(&rest[..at]);
        match rest[at] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// The cells of a box table's rows, kept until every row is in and the columns' widths are
/// known: each cell's text as [`push_text`] writes it (UTF-8, up to the value's first NUL)
/// followed by a NUL, which no cell's text holds, row after row, in blocks of
/// [`TABLE_BLOCK`] rows (no copy as it grows). About the size of the result as CSV: a table
/// of millions of rows holds no value and no string per cell.
#[derive(Default)]
struct TableCells {
    rows: usize,
    /// The blocks of rows: the pieces the drawing threads take.
    blocks: Vec<Vec<u8>>,
}

/// Rows per block of a box table's cells, measured or drawn by one thread at a time.
const TABLE_BLOCK: usize = 4096;

impl TableCells {
    /// Where the next row's cells go.
    fn next_row(&mut self) -> &mut Vec<u8> {
        if self.rows.is_multiple_of(TABLE_BLOCK) {
            // Room for a block like the last one, so that a block is rarely copied.
            let room = self
                .blocks
                .last()
                .map_or(64 * 1024, |b| b.len() + b.len() / 8);
            self.blocks.push(Vec::with_capacity(room));
        }
        self.rows += 1;
        self.blocks.last_mut().expect("a block was pushed")
    }
}

/// A cell's width in characters: the most characters on one of its lines (the texts are
/// UTF-8: every byte but a continuation byte starts a character). The second value says
/// whether the cell has more than one line.
fn cell_width(cell: &[u8]) -> (usize, bool) {
    let (mut widest, mut line, mut lines) = (0, 0, false);
    for &b in cell {
        if b == b'\n' {
            lines = true;
            widest = widest.max(line);
            line = 0;
        } else if b & 0xc0 != 0x80 {
            line += 1;
        }
    }
    (widest.max(line), lines)
}

/// The first cell of `bytes` (which starts at a cell): its length in bytes (its NUL not
/// counted), its width in characters on its widest line ([`cell_width`]) and whether it has
/// more than one line. One pass over the cell's bytes, as the table's millions of cells need.
#[inline]
fn next_cell(bytes: &[u8]) -> (usize, usize, bool) {
    let (mut line, mut widest, mut lines) = (0, 0, false);
    for (at, &b) in bytes.iter().enumerate() {
        match b {
            0 => return (at, widest.max(line), lines),
            b'\n' => {
                lines = true;
                widest = widest.max(line);
                line = 0;
            }
            // Every byte but a UTF-8 continuation byte starts a character.
            _ => line += usize::from(b & 0xc0 != 0x80),
        }
    }
    (bytes.len(), widest.max(line), lines)
}

/// The widths of the columns of the cells in `blocks` (whole rows of `columns` cells each),
/// and whether any cell has more than one line.
fn measure(blocks: &[&[u8]], columns: usize) -> (Vec<usize>, bool) {
    let mut widths = vec![0; columns];
    let mut multiline = false;
    if columns == 0 {
        return (widths, multiline);
    }
    for block in blocks {
        let (mut at, mut column) = (0, 0);
        while at < block.len() {
            let (len, w, lines) = next_cell(&block[at..]);
            widths[column] = widths[column].max(w);
            multiline |= lines;
            at += len + 1;
            column += 1;
            if column == columns {
                column = 0;
            }
        }
    }
    (widths, multiline)
}

/// Draws the rows whose cells are `bytes` as `sqlite3 -box` does, into `out`: a rule between
/// rows when some cell of the table has several lines (not before the table's first row,
/// `first`), each of a row's lines between `│`, every cell padded to its column's width.
fn draw(bytes: &[u8], widths: &[usize], multiline: bool, first: bool, out: &mut Vec<u8>) {
    const SPACES: &[u8] = &[b' '; 256];
    const BAR: &[u8] = "│".as_bytes();
    const CLOSE: &[u8] = " │".as_bytes();
    let pad = |out: &mut Vec<u8>, mut n: usize| {
        while n > 0 {
            let k = n.min(SPACES.len());
            out.extend_from_slice(&SPACES[..k]);
            n -= k;
        }
    };
    let columns = widths.len();
    if columns == 0 {
        return;
    }
    if !multiline {
        // One line a row: each cell copied and padded as it is found. A line holds at least
        // its widths' spaces and 4 bytes a column (a space, a space and `│`).
        let line = widths.iter().sum::<usize>() + 4 * columns + BAR.len() + 1;
        out.reserve(bytes.len() + bytes.len() / 2 + line * 64);
        let mut at = 0;
        while at < bytes.len() {
            out.extend_from_slice(BAR);
            for &w in widths {
                let (len, width, _) = next_cell(&bytes[at..]);
                out.push(b' ');
                out.extend_from_slice(&bytes[at..at + len]);
                pad(out, w - width);
                out.extend_from_slice(CLOSE);
                at += len + 1;
            }
            out.push(b'\n');
        }
        return;
    }
    let middle = rule(widths, "├", "┼", "┤");
    let mut row_cells: Vec<&[u8]> = Vec::with_capacity(columns);
    let mut at = 0;
    let mut row = 0;
    while at < bytes.len() {
        row_cells.clear();
        for _ in 0..columns {
            let (len, _, _) = next_cell(&bytes[at..]);
            row_cells.push(&bytes[at..at + len]);
            at += len + 1;
        }
        if row > 0 || !first {
            out.extend_from_slice(middle.as_bytes());
        }
        row += 1;
        let lines = row_cells
            .iter()
            .map(|c| c.iter().filter(|&&b| b == b'\n').count() + 1)
            .max()
            .unwrap_or(1);
        for l in 0..lines {
            out.extend_from_slice(BAR);
            for (cell, &w) in row_cells.iter().zip(widths) {
                let text = cell.split(|&b| b == b'\n').nth(l).unwrap_or(b"");
                out.push(b' ');
                out.extend_from_slice(text);
                pad(out, w - cell_width(text).0);
                out.extend_from_slice(CLOSE);
            }
            out.push(b'\n');
        }
    }
}

/// A horizontal rule of the box: `l`, each column's width plus two of `─` joined by `m`, `r`.
fn rule(widths: &[usize], l: &str, m: &str, r: &str) -> String {
    let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
    format!("{l}{}{r}\n", parts.join(m))
}

/// Writes the rows of `table` as `sqlite3 -box` draws them, on `threads` threads: they first
/// measure the columns' widths, each over its own blocks of rows, then draw runs of blocks
/// ([`draw_runs`]) while this thread writes the runs drawn before, in order.
fn boxed(
    out: &mut impl std::io::Write,
    names: &[String],
    table: &TableCells,
    threads: usize,
) -> std::io::Result<()> {
    let columns = names.len();
    let blocks: Vec<&[u8]> = table.blocks.iter().map(Vec::as_slice).collect();
    let per = blocks.len().div_ceil(threads).max(1);
    // One block (up to 4,096 rows: most tables printed to a terminal) is measured and drawn
    // on this thread: starting threads took longer than the work.
    let measured: Vec<(Vec<usize>, bool)> = if blocks.len() <= 1 {
        vec![measure(&blocks, columns)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = blocks
                .chunks(per)
                .map(|mine| s.spawn(move || measure(mine, columns)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("measuring a box table's columns"))
                .collect()
        })
    };
    let mut widths: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
    let mut multiline = false;
    for (w, m) in measured {
        for (a, b) in widths.iter_mut().zip(w) {
            *a = (*a).max(b);
        }
        multiline |= m;
    }
    let mut head = rule(&widths, "┌", "┬", "┐");
    head.push('│');
    for (n, w) in names.iter().zip(&widths) {
        let pad = w - n.chars().count();
        let left = pad / 2;
        let _ = write!(
            head,
            " {}{}{} │",
            " ".repeat(left),
            n,
            " ".repeat(pad - left)
        );
    }
    head.push('\n');
    head.push_str(&rule(&widths, "├", "┼", "┤"));
    out.write_all(head.as_bytes())?;
    draw_runs(out, &blocks, &widths, multiline, threads)?;
    out.write_all(rule(&widths, "└", "┴", "┘").as_bytes())
}

/// Blocks of rows a drawing thread draws at a time ([`draw_runs`]).
const BLOCKS_PER_RUN: usize = 4;

/// Draws `blocks` (whole rows of cells) in runs of [`BLOCKS_PER_RUN`] on `threads` threads
/// and writes them to `out` in order as they are done. No thread waits for a round of the
/// others: the runs are handed out as tickets, each with a buffer, at most four per thread
/// ahead of the run being written, and a written run's buffer goes out again with the next
/// ticket (the drawn runs take a few megabytes, allocated and faulted in once).
fn draw_runs(
    out: &mut impl std::io::Write,
    blocks: &[&[u8]],
    widths: &[usize],
    multiline: bool,
    threads: usize,
) -> std::io::Result<()> {
    let runs: Vec<&[&[u8]]> = blocks.chunks(BLOCKS_PER_RUN).collect();
    if let [run] = runs[..] {
        let mut buf = Vec::new();
        for (i, block) in run.iter().enumerate() {
            draw(block, widths, multiline, i == 0, &mut buf);
        }
        return out.write_all(&buf);
    }
    let window = (4 * threads).min(runs.len());
    // A ticket: the run to draw and a buffer to draw it into. A drawn run comes back with
    // its number, or `None` from a thread that panicked (its panic is raised at the scope's
    // end), so that this thread never waits for a run no one will draw.
    let (tickets, taken) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(window);
    let (done, drawn) = std::sync::mpsc::sync_channel::<Option<(usize, Vec<u8>)>>(window);
    let taken = std::sync::Mutex::new(taken);
    std::thread::scope(|s| {
        for _ in 0..threads.min(runs.len()) {
            let (taken, done, runs) = (&taken, done.clone(), &runs);
            s.spawn(move || {
                /// Says a drawing thread is gone when it panics.
                struct Gone(std::sync::mpsc::SyncSender<Option<(usize, Vec<u8>)>>);
                impl Drop for Gone {
                    fn drop(&mut self) {
                        if std::thread::panicking() {
                            let _ = self.0.send(None);
                        }
                    }
                }
                let gone = Gone(done);
                loop {
                    let ticket = taken.lock().map(|t| t.recv());
                    let Ok(Ok((run, mut buf))) = ticket else {
                        return;
                    };
                    buf.clear();
                    for (i, block) in runs[run].iter().enumerate() {
                        draw(block, widths, multiline, run == 0 && i == 0, &mut buf);
                    }
                    if gone.0.send(Some((run, buf))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done);
        for run in 0..window {
            tickets
                .send((run, Vec::new()))
                .expect("the drawing threads wait for tickets");
        }
        let mut next_ticket = window;
        let mut ready: std::collections::BTreeMap<usize, Vec<u8>> = Default::default();
        let mut next = 0;
        while next < runs.len() {
            let Ok(Some((run, buf))) = drawn.recv() else {
                break;
            };
            ready.insert(run, buf);
            while let Some(buf) = ready.remove(&next) {
                out.write_all(&buf)?;
                next += 1;
                if next_ticket < runs.len() {
                    // The threads are alive: the run before this one came back.
                    let _ = tickets.send((next_ticket, buf));
                    next_ticket += 1;
                }
            }
        }
        drop(tickets);
        Ok(())
    })
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

    /// `sqlite3 -box` drawn the plain way, one row after another from the values: what the
    /// parallel [`boxed`] must write byte for byte.
    fn boxed_one_by_one(names: &[String], rows: &[Vec<Value>]) -> String {
        let text = |v: &Value| {
            let mut b = Vec::new();
            push_text(&mut b, v.as_ref());
            String::from_utf8(b).expect("push_text writes UTF-8")
        };
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = names.iter().map(|n| width(n)).collect();
        let multiline = rows.iter().flatten().any(|v| text(v).contains('\n'));
        for r in rows {
            for (w, v) in widths.iter_mut().zip(r) {
                for l in text(v).split('\n') {
                    *w = (*w).max(width(l));
                }
            }
        }
        let mut s = rule(&widths, "┌", "┬", "┐");
        s.push('│');
        for (n, w) in names.iter().zip(&widths) {
            let pad = w - width(n);
            let left = pad / 2;
            s += &format!(" {}{}{} │", " ".repeat(left), n, " ".repeat(pad - left));
        }
        s.push('\n');
        s += &rule(&widths, "├", "┼", "┤");
        for (i, r) in rows.iter().enumerate() {
            if i > 0 && multiline {
                s += &rule(&widths, "├", "┼", "┤");
            }
            let cells: Vec<String> = r.iter().map(text).collect();
            let lines = cells.iter().map(|c| c.split('\n').count()).max().unwrap();
            for l in 0..lines {
                s.push('│');
                for (c, w) in cells.iter().zip(&widths) {
                    let t = c.split('\n').nth(l).unwrap_or("");
                    s += &format!(" {}{} │", t, " ".repeat(w - width(t)));
                }
                s.push('\n');
            }
        }
        s + &rule(&widths, "└", "┴", "┘")
    }

    #[test]
    fn a_cell_is_measured_as_its_lines_are() {
        // Cells of every length around the 8-byte steps, a line break or a multi-byte
        // character at every place, ended by a NUL or by the end of the bytes.
        let pieces: [&str; 5] = ["a", "é", "\n", "日本", "x\ny"];
        for len in 0..40 {
            for (p, piece) in pieces.iter().enumerate() {
                for place in 0..=len {
                    let mut cell: String =
                        (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
                    cell.insert_str(place, piece);
                    let (width, lines) = cell_width(cell.as_bytes());
                    let ended = format!("{cell}\0more");
                    assert_eq!(
                        next_cell(ended.as_bytes()),
                        (cell.len(), width, lines),
                        "{cell:?} ({p})"
                    );
                    assert_eq!(next_cell(cell.as_bytes()), (cell.len(), width, lines));
                }
            }
        }
    }

    #[test]
    fn a_box_table_drawn_in_parallel_is_the_one_drawn_row_by_row() {
        // Enough rows for several rounds of blocks on every thread; cells of every storage
        // class, wide and multi-byte characters, NULs, bytes that are not UTF-8, and (in the
        // second table) cells of several lines, whose rows are ruled apart.
        let names = vec!["id".to_string(), "v".to_string(), "name é".to_string()];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for lines in [false, true] {
            let rows: Vec<Vec<Value>> = (0..TABLE_BLOCK * 37 + 5)
                .map(|i| {
                    let v = match next() % 8 {
                        _ if lines && i % 1000 == 3 => Value::text("two\nlines\n"),
                        0 => Value::Null,
                        1 => Value::Real(next() as f64 / 7.0),
                        2 => Value::text("ünïcødé ✓"),
                        3 => Value::Blob(vec![b'a', 0, b'b']),
                        4 => Value::Text(b"x\xffy".to_vec()),
                        6 => Value::text("x".repeat((next() % 300) as usize)),
                        _ => Value::Integer(next() as i64),
                    };
                    vec![Value::Integer(i as i64), v, Value::text("")]
                })
                .collect();
            assert_eq!(
                render(Format::Table, &names, &rows),
                boxed_one_by_one(&names, &rows),
                "lines {lines}"
            );
            // One block (measured and drawn on the caller's thread; with `lines`, row 3 has
            // two), and one run of several blocks (drawn on the caller's thread).
            for few in [&rows[..5], &rows[..TABLE_BLOCK * 2 + 7]] {
                assert_eq!(
                    render(Format::Table, &names, few),
                    boxed_one_by_one(&names, few),
                    "lines {lines}, {} rows",
                    few.len()
                );
            }
            // As many drawing threads as `--cores` gives executors: one, or more than rows
            // of blocks per round.
            for threads in [1, 3] {
                let mut out = Vec::new();
                let mut w =
                    RowWriter::new(Format::Table, names.clone(), &mut out).drawing_threads(threads);
                for r in &rows {
                    w.row(r).expect("writing to memory");
                }
                w.finish().expect("writing to memory");
                assert_eq!(
                    String::from_utf8(out).expect("UTF-8"),
                    boxed_one_by_one(&names, &rows),
                    "lines {lines}, {threads} threads"
                );
            }
        }
    }
}
