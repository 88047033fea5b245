//! SQLite's JSON SQL functions (`json.c` of SQLite 3.54.1), ported line for line.
//!
//! SQLite parses JSON text (with its JSON5 extensions) into its binary form, JSONB, edits and
//! searches that form, and renders it back as minified text; this module does the same with
//! the same algorithms, so every answer, error message and JSONB byte is SQLite's:
//!
//! - [`JsonFunc`]: the scalar functions (`json`, `jsonb`, `json_extract`, `->`, `->>`,
//!   `json_type`, `json_valid`, `json_array_length`, `json_quote`, `json_array`,
//!   `json_object`, `json_insert`/`replace`/`set`/`remove`/`patch`, `json_array_insert`,
//!   `json_pretty`, `json_error_position` and every `jsonb_` variant), found by
//!   [`JsonFunc::from_name`] and called by [`call`];
//! - [`JsonGroup`]: `json_group_array`/`json_group_object` (and `jsonb_`) as aggregate states
//!   with `update`, `merge` (a later range's elements appended) and `finish`;
//! - [`JsonArg`]: an argument and whether it carries SQLite's JSON subtype (74): a text
//!   argument produced by a subtype-returning call is embedded as JSON instead of as a
//!   string by the functions that read subtypes (`json_array`, `json_object`, `json_quote`,
//!   the values of `json_set` and friends, the aggregates).
//!
//! A call returns the value and whether SQLite attaches the JSON subtype to it (only ever for
//! text; a JSONB blob is recognised by its bytes). Reals are rendered by SQLite's own
//! `sqlite3_snprintf` from the bundled library (as [`crate::value::real_to_text`] does), so
//! `%!0.17g` and its JSON `9.0e999` for infinities are SQLite's digits exactly.
//!
//! SQLite's per-statement parse cache changes answers: the text an edit function (`json_set`,
//! `json_insert`, `json_replace`, `json_array_insert`, `json_remove` with paths, `json_patch`)
//! returns is cached with the JSONB it was rendered from when it outgrew a 100-byte buffer
//! (or rendered a JSON5 hexadecimal integer), and a later JSON function reading equal text
//! gets that JSONB: raw SQL text, JSON5 forms and denormalized headers survive into `jsonb_`
//! results, and a hexadecimal integer beyond 64 bits stays an integer (`json_type` says
//! `integer` of text that reads `9.0e999`). [`call_full`] returns that JSONB with the text
//! ([`JsonResult::jsonb`]); passing results on with [`JsonArg::result`] makes nested calls
//! exact. Where the 100-byte rule cannot be decided from the text (93 to 99 bytes without a
//! hexadecimal integer) and the two readings differ, the call is refused (`Err`). Equal text
//! that reaches a reader another way (after `||` or `CAST`, through a subquery, a later row's
//! value, or an edit function's own input equal to an output of an earlier row) is not seen,
//! nor the cache's eviction after four other parsed texts: exactness needs the front end to
//! refuse a statement that has both a call for which [`JsonFunc::caches_output`] holds and
//! one for which [`JsonFunc::cache_sensitive`] holds, unless it accepts that residue (a row's
//! text equal to an earlier edit output of the same statement). `json_each`/`json_tree` are
//! not here.
//!
//! Inputs that may nest deeper than a few dozen levels (SQLite allows 1000) are evaluated on a
//! thread with a large stack; a panic (a bug of the port) is refused, never guessed around.

use crate::value::{real_to_text, Value, ValueRef};
use partitioner::numeric_text::{atof, atoi64, dec_or_hex_to_i64};

#[cfg(test)]
mod tests;

const JSONB_NULL: u8 = 0;
const JSONB_TRUE: u8 = 1;
const JSONB_FALSE: u8 = 2;
const JSONB_INT: u8 = 3;
const JSONB_INT5: u8 = 4;
const JSONB_FLOAT: u8 = 5;
const JSONB_FLOAT5: u8 = 6;
const JSONB_TEXT: u8 = 7;
const JSONB_TEXTJ: u8 = 8;
const JSONB_TEXT5: u8 = 9;
const JSONB_TEXTRAW: u8 = 10;
const JSONB_ARRAY: u8 = 11;
const JSONB_OBJECT: u8 = 12;

const JSON_TYPE_NAMES: [&str; 16] = [
    "null", "true", "false", "integer", "integer", "real", "real", "text", "text", "text", "text",
    "array", "object", "", "", "",
];

const JSON_MAX_DEPTH: u32 = 1000;
const JSON_INVALID_CHAR: u32 = 0x99999;

const JSTRING_MALFORMED: u8 = 0x02;
const JSTRING_TOODEEP: u8 = 0x04;
const JSTRING_ERR: u8 = 0x08;

const JEDIT_DEL: u8 = 1;
const JEDIT_REPL: u8 = 2;
const JEDIT_INS: u8 = 3;
const JEDIT_SET: u8 = 4;
const JEDIT_AINS: u8 = 5;

const MALFORMED: &str = "malformed JSON";
const TOO_DEEP: &str = "JSON nested too deep";
const BLOB_ERR: &str = "JSON cannot hold BLOB values";

/// A JSON function's argument: its value and whether it carries SQLite's JSON subtype (it
/// was produced by a call whose result carries it).
#[derive(Clone, Copy, Debug)]
pub struct JsonArg<'a> {
    /// The value.
    pub value: ValueRef<'a>,
    /// Whether the value carries the JSON subtype.
    pub json: bool,
    /// For text an edit function returned ([`JsonResult::jsonb`]): the JSONB it was rendered
    /// from, which SQLite's parse cache may hand to a JSON function reading that text.
    pub jsonb: Option<&'a [u8]>,
}

impl<'a> JsonArg<'a> {
    /// A plain SQL value (no subtype).
    pub fn sql(value: ValueRef<'a>) -> JsonArg<'a> {
        JsonArg {
            value,
            json: false,
            jsonb: None,
        }
    }

    /// The result of a JSON call as the argument of another.
    pub fn result(r: &'a JsonResult) -> JsonArg<'a> {
        JsonArg {
            value: r.value.as_ref(),
            json: r.json,
            jsonb: r.jsonb.as_deref(),
        }
    }
}

/// A JSON call's result: the value, whether it carries the JSON subtype, and for the text of an
/// edit function (`json_set`, `json_insert`, `json_replace`, `json_array_insert`, `json_remove`
/// with paths, `json_patch`) the JSONB it was rendered from (SQLite caches it for the rest of
/// the statement: pass it on with [`JsonArg::result`]).
#[derive(Clone, Debug, PartialEq)]
pub struct JsonResult {
    /// The value.
    pub value: Value,
    /// Whether it carries the JSON subtype.
    pub json: bool,
    /// The JSONB an edit function's text was rendered from.
    pub jsonb: Option<Vec<u8>>,
}

/// The scalar JSON functions (the `Jsonb` variants return JSONB blobs instead of text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JsonFunc {
    /// `json(X)`.
    Json,
    /// `jsonb(X)`.
    Jsonb,
    /// `json_extract(X, P, ...)`.
    Extract,
    /// `jsonb_extract(X, P, ...)`.
    JsonbExtract,
    /// `X -> P`.
    Arrow,
    /// `X ->> P`.
    ArrowText,
    /// `json_type(X [, P])`.
    Type,
    /// `json_valid(X [, FLAGS])`.
    Valid,
    /// `json_array_length(X [, P])`.
    ArrayLength,
    /// `json_object(K, V, ...)`.
    Object,
    /// `jsonb_object(K, V, ...)`.
    JsonbObject,
    /// `json_array(V, ...)`.
    Array,
    /// `jsonb_array(V, ...)`.
    JsonbArray,
    /// `json_quote(V)`.
    Quote,
    /// `json_insert(X, P, V, ...)`.
    Insert,
    /// `jsonb_insert(X, P, V, ...)`.
    JsonbInsert,
    /// `json_replace(X, P, V, ...)`.
    Replace,
    /// `jsonb_replace(X, P, V, ...)`.
    JsonbReplace,
    /// `json_set(X, P, V, ...)`.
    Set,
    /// `jsonb_set(X, P, V, ...)`.
    JsonbSet,
    /// `json_array_insert(X, P, V, ...)`.
    ArrayInsert,
    /// `jsonb_array_insert(X, P, V, ...)`.
    JsonbArrayInsert,
    /// `json_remove(X, P, ...)`.
    Remove,
    /// `jsonb_remove(X, P, ...)`.
    JsonbRemove,
    /// `json_patch(T, P)`.
    Patch,
    /// `jsonb_patch(T, P)`.
    JsonbPatch,
    /// `json_error_position(X)`.
    ErrorPosition,
    /// `json_pretty(X [, INDENT])`.
    Pretty,
    /// No SQL name: the value of a `json_group_array`/`json_group_object` aggregate in the
    /// group stage, handed on unchanged with the JSON subtype SQLite gives it.
    Group,
}

/// Which argument counts a function accepts: `None` for any.
fn arities(f: JsonFunc) -> Option<&'static [usize]> {
    use JsonFunc::*;
    match f {
        Json | Jsonb | Quote | ErrorPosition | Group => Some(&[1]),
        Arrow | ArrowText | Patch | JsonbPatch => Some(&[2]),
        Type | Valid | ArrayLength | Pretty => Some(&[1, 2]),
        _ => None,
    }
}

impl JsonFunc {
    /// The function for a lower-case SQL name (`"->"` and `"->>"` for the operators) and an
    /// argument count: `None` if the name is no JSON scalar function, `Some(Err)` with
    /// SQLite's message when the count is wrong.
    pub fn from_name(name: &str, args: usize) -> Option<Result<JsonFunc, String>> {
        use JsonFunc::*;
        let f = match name {
            "json" => Json,
            "jsonb" => Jsonb,
            "json_extract" => Extract,
            "jsonb_extract" => JsonbExtract,
            "->" => Arrow,
            "->>" => ArrowText,
            "json_type" => Type,
            "json_valid" => Valid,
            "json_array_length" => ArrayLength,
            "json_object" => Object,
            "jsonb_object" => JsonbObject,
            "json_array" => Array,
            "jsonb_array" => JsonbArray,
            "json_quote" => Quote,
            "json_insert" => Insert,
            "jsonb_insert" => JsonbInsert,
            "json_replace" => Replace,
            "jsonb_replace" => JsonbReplace,
            "json_set" => Set,
            "jsonb_set" => JsonbSet,
            "json_array_insert" => ArrayInsert,
            "jsonb_array_insert" => JsonbArrayInsert,
            "json_remove" => Remove,
            "jsonb_remove" => JsonbRemove,
            "json_patch" => Patch,
            "jsonb_patch" => JsonbPatch,
            "json_error_position" => ErrorPosition,
            "json_pretty" => Pretty,
            _ => return None,
        };
        Some(match arities(f) {
            Some(ok) if !ok.contains(&args) => {
                Err(format!("wrong number of arguments to function {name}()"))
            }
            _ => Ok(f),
        })
    }

    /// Whether a call with `args` arguments is an edit whose text SQLite may put in its
    /// statement-wide parse cache (see the module documentation).
    pub fn caches_output(self, args: usize) -> bool {
        use JsonFunc::*;
        match self {
            Insert | Replace | Set | ArrayInsert => args >= 3,
            Remove => args >= 2,
            Patch => args == 2,
            _ => false,
        }
    }

    /// Whether the function's answer can depend on reading a document through SQLite's parse
    /// cache rather than parsing its text: the JSONB-returning readers (their bytes) and the
    /// ones returning a node's SQL value or type (a hexadecimal integer beyond 64 bits).
    /// Functions that only render, count or validate give the same answer either way.
    pub fn cache_sensitive(self) -> bool {
        use JsonFunc::*;
        matches!(
            self,
            Jsonb
                | JsonbExtract
                | JsonbInsert
                | JsonbReplace
                | JsonbSet
                | JsonbArrayInsert
                | JsonbRemove
                | JsonbPatch
                | Type
                | Extract
                | ArrowText
        )
    }

    /// Whether the function returns JSONB (the `jsonb_` variants).
    pub fn returns_jsonb(self) -> bool {
        use JsonFunc::*;
        matches!(
            self,
            Jsonb
                | JsonbExtract
                | JsonbObject
                | JsonbArray
                | JsonbInsert
                | JsonbReplace
                | JsonbSet
                | JsonbArrayInsert
                | JsonbRemove
                | JsonbPatch
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Character classes (SQLite's tables).

fn is_space(c: u8) -> bool {
    matches!(c, 0x09 | 0x0a | 0x0d | 0x20)
}

fn is_ok(c: u8) -> bool {
    !(c < 0x20 || c == b'"' || c == b'\'' || c == b'\\')
}

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn is_xdigit(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `sqlite3JsonId1`: letters, `_`, `$` and non-ASCII bytes.
fn json_id1(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

/// `sqlite3JsonId2`: `sqlite3JsonId1` and digits.
fn json_id2(c: u8) -> bool {
    json_id1(c) || is_digit(c)
}

fn hex_to_int(h: u8) -> u32 {
    let h = u32::from(h);
    (h + 9 * (1 & (h >> 6))) & 0xf
}

/// Byte `i` of a C string (0 past its end).
fn at(z: &[u8], i: usize) -> u8 {
    z.get(i).copied().unwrap_or(0)
}

fn is_2hex(z: &[u8], i: usize) -> bool {
    is_xdigit(at(z, i)) && is_xdigit(at(z, i + 1))
}

fn is_4hex(z: &[u8], i: usize) -> bool {
    is_2hex(z, i) && is_2hex(z, i + 2)
}

fn hex4(z: &[u8], i: usize) -> u32 {
    (hex_to_int(at(z, i)) << 12)
        + (hex_to_int(at(z, i + 1)) << 8)
        + (hex_to_int(at(z, i + 2)) << 4)
        + hex_to_int(at(z, i + 3))
}

/// `strspn(z+i, jsonSpaces)`.
fn spaces(z: &[u8], i: usize) -> usize {
    let mut n = 0;
    while is_space(at(z, i + n)) {
        n += 1;
    }
    n
}

fn strnicmp(z: &[u8], i: usize, pat: &[u8]) -> bool {
    pat.iter()
        .enumerate()
        .all(|(k, &p)| at(z, i + k).eq_ignore_ascii_case(&p))
}

/// `json5Whitespace`: bytes of JSON5 whitespace (and comments) at `z[i..]`.
#[allow(clippy::collapsible_match)] // kept in the shape of SQLite's switch
fn json5_whitespace(z: &[u8], i: usize) -> usize {
    let mut n = i;
    loop {
        match at(z, n) {
            0x09 | 0x0a | 0x0b | 0x0c | 0x0d | 0x20 => n += 1,
            b'/' => {
                if at(z, n + 1) == b'*' && at(z, n + 2) != 0 {
                    let mut j = n + 3;
                    while at(z, j) != b'/' || at(z, j - 1) != b'*' {
                        if at(z, j) == 0 {
                            return n - i;
                        }
                        j += 1;
                    }
                    n = j + 1;
                } else if at(z, n + 1) == b'/' {
                    let mut j = n + 2;
                    loop {
                        let c = at(z, j);
                        if c == 0 {
                            break;
                        }
                        if c == b'\n' || c == b'\r' {
                            break;
                        }
                        if c == 0xe2
                            && at(z, j + 1) == 0x80
                            && (at(z, j + 2) == 0xa8 || at(z, j + 2) == 0xa9)
                        {
                            j += 2;
                            break;
                        }
                        j += 1;
                    }
                    n = j;
                    if at(z, n) != 0 {
                        n += 1;
                    }
                } else {
                    return n - i;
                }
            }
            0xc2 => {
                if at(z, n + 1) == 0xa0 {
                    n += 2;
                } else {
                    return n - i;
                }
            }
            0xe1 => {
                if at(z, n + 1) == 0x9a && at(z, n + 2) == 0x80 {
                    n += 3;
                } else {
                    return n - i;
                }
            }
            0xe2 => {
                if at(z, n + 1) == 0x80 {
                    let c = at(z, n + 2);
                    if c < 0x80 {
                        return n - i;
                    }
                    if c <= 0x8a || c == 0xa8 || c == 0xa9 || c == 0xaf {
                        n += 3;
                    } else {
                        return n - i;
                    }
                } else if at(z, n + 1) == 0x81 && at(z, n + 2) == 0x9f {
                    n += 3;
                } else {
                    return n - i;
                }
            }
            0xe3 => {
                if at(z, n + 1) == 0x80 && at(z, n + 2) == 0x80 {
                    n += 3;
                } else {
                    return n - i;
                }
            }
            0xef => {
                if at(z, n + 1) == 0xbb && at(z, n + 2) == 0xbf {
                    n += 3;
                } else {
                    return n - i;
                }
            }
            _ => return n - i,
        }
    }
}

/// `sqlite3Utf8ReadLimited`.
fn utf8_read_limited(z: &[u8], n: usize) -> (u32, usize) {
    let mut c = u32::from(z[0]);
    let mut i = 1;
    if c >= 0xc0 {
        c = match c {
            0xc0..=0xdf => c & 0x1f,
            0xe0..=0xef => c & 0x0f,
            0xf0..=0xf7 => c & 0x07,
            0xf8..=0xfb => c & 0x03,
            0xfc..=0xfd => c & 0x01,
            _ => 0,
        };
        let n = n.min(4);
        while i < n && (z[i] & 0xc0) == 0x80 {
            c = (c << 6) + u32::from(0x3f & z[i]);
            i += 1;
        }
    }
    (c, i)
}

/// `jsonBytesToBypass`: escaped newlines to skip at `z[..n]`.
fn bytes_to_bypass(z: &[u8], n: usize) -> usize {
    let mut i = 0;
    while i + 1 < n {
        if z[i] != b'\\' {
            return i;
        }
        if z[i + 1] == b'\n' {
            i += 2;
            continue;
        }
        if z[i + 1] == b'\r' {
            if i + 2 < n && z[i + 2] == b'\n' {
                i += 3;
            } else {
                i += 2;
            }
            continue;
        }
        if z[i + 1] == 0xe2
            && i + 3 < n
            && z[i + 2] == 0x80
            && (z[i + 3] == 0xa8 || z[i + 3] == 0xa9)
        {
            i += 4;
            continue;
        }
        break;
    }
    i
}

/// `jsonUnescapeOneChar` on `z[..n]` (which begins with a backslash): the character and the
/// bytes of the escape.
fn unescape_one_char(z: &[u8], n: usize) -> (u32, usize) {
    if n < 2 {
        return (JSON_INVALID_CHAR, n);
    }
    match z[1] {
        b'u' => {
            if n < 6 {
                return (JSON_INVALID_CHAR, n);
            }
            let v = hex4(z, 2);
            if (v & 0xfc00) == 0xd800 && n >= 12 && z[6] == b'\\' && z[7] == b'u' {
                let vlo = hex4(z, 8);
                if (vlo & 0xfc00) == 0xdc00 {
                    return (((v & 0x3ff) << 10) + (vlo & 0x3ff) + 0x10000, 12);
                }
            }
            (v, 6)
        }
        b'b' => (0x08, 2),
        b'f' => (0x0c, 2),
        b'n' => (b'\n'.into(), 2),
        b'r' => (b'\r'.into(), 2),
        b't' => (b'\t'.into(), 2),
        b'v' => (0x0b, 2),
        b'0' => {
            if n > 2 && is_digit(z[2]) {
                (JSON_INVALID_CHAR, 2)
            } else {
                (0, 2)
            }
        }
        b'\'' | b'"' | b'/' | b'\\' => (u32::from(z[1]), 2),
        b'x' => {
            if n < 4 {
                return (JSON_INVALID_CHAR, n);
            }
            ((hex_to_int(z[2]) << 4) | hex_to_int(z[3]), 4)
        }
        0xe2 | b'\r' | b'\n' => {
            let skip = bytes_to_bypass(z, n);
            if skip == 0 {
                (JSON_INVALID_CHAR, n)
            } else if skip == n {
                (0, n)
            } else if z[skip] == b'\\' {
                let (c, k) = unescape_one_char(&z[skip..], n - skip);
                (c, skip + k)
            } else {
                let (c, k) = utf8_read_limited(&z[skip..], n - skip);
                (c, skip + k)
            }
        }
        _ => (JSON_INVALID_CHAR, 2),
    }
}

/// Reads one label character for `jsonLabelCompareEscaped`.
fn label_char(z: &mut &[u8], raw: bool) -> u32 {
    if z.is_empty() {
        return 0;
    }
    if raw || z[0] != b'\\' {
        let c = u32::from(z[0]);
        if c >= 0xc0 {
            let (c, sz) = utf8_read_limited(z, z.len());
            *z = &z[sz..];
            c
        } else {
            *z = &z[1..];
            c
        }
    } else {
        let (c, n) = unescape_one_char(z, z.len());
        *z = &z[n.min(z.len())..];
        c
    }
}

/// `jsonLabelCompare`.
fn label_compare(mut left: &[u8], raw_left: bool, mut right: &[u8], raw_right: bool) -> bool {
    if raw_left && raw_right {
        return left == right;
    }
    loop {
        let cl = label_char(&mut left, raw_left);
        let cr = label_char(&mut right, raw_right);
        if cl != cr {
            return false;
        }
        if cl == 0 {
            return true;
        }
    }
}

/// `%!0.17g` (and `%!.17g` without `zero`) through SQLite's own formatter.
fn sqlite_printf_real(r: f64, zero: bool) -> String {
    let mut buf = [0u8; 64];
    let fmt: &std::ffi::CStr = if zero { c"%!0.17g" } else { c"%!.17g" };
    // SAFETY: the buffer is writable for its length, the format is NUL-terminated and takes
    // exactly one double; sqlite3_snprintf always NUL-terminates within the given size.
    unsafe {
        libsqlite3_sys::sqlite3_snprintf(
            buf.len() as std::ffi::c_int,
            buf.as_mut_ptr().cast(),
            fmt.as_ptr(),
            r,
        );
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// `sqlite3_value_text` of a value (NULL has none).
fn value_text(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string().into_bytes()),
        ValueRef::Real(r) => Some(real_to_text(r).into_bytes()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t.to_vec()),
    }
}

/// `sqlite3_value_text` read as a C string (up to its first NUL).
fn value_cstr(v: ValueRef<'_>) -> Option<Vec<u8>> {
    value_text(v).map(|mut t| {
        if let Some(p) = t.iter().position(|&b| b == 0) {
            t.truncate(p);
        }
        t
    })
}

/// `%Q` of a C string.
fn quote_q(z: &[u8]) -> String {
    let mut s = Vec::with_capacity(z.len() + 2);
    s.push(b'\'');
    for &b in z {
        if b == b'\'' {
            s.push(b'\'');
        }
        s.push(b);
    }
    s.push(b'\'');
    String::from_utf8_lossy(&s).into_owned()
}

// ---------------------------------------------------------------------------------------------
// JsonString.

/// `JsonString`: text under construction, its error flags and the error message SQLite would
/// have set on the function's context.
#[derive(Debug, Clone, Default, PartialEq)]
struct JStr {
    buf: Vec<u8>,
    err: u8,
    msg: Option<&'static str>,
}

/// A [`JStr`] in serde's data model (a spilled JSON aggregate): its message as text, read
/// back as the constant it was (an unknown one as "malformed JSON").
#[derive(serde::Serialize, serde::Deserialize)]
struct SpilledJStr {
    buf: Vec<u8>,
    err: u8,
    msg: Option<String>,
}

impl serde::Serialize for JStr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SpilledJStr::from(self.clone()).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SpilledJStr::deserialize(d).map(JStr::from)
    }
}

impl From<JStr> for SpilledJStr {
    fn from(s: JStr) -> Self {
        SpilledJStr {
            buf: s.buf,
            err: s.err,
            msg: s.msg.map(str::to_string),
        }
    }
}

impl From<SpilledJStr> for JStr {
    fn from(s: SpilledJStr) -> Self {
        JStr {
            buf: s.buf,
            err: s.err,
            msg: s.msg.map(|m| {
                [BLOB_ERR, TOO_DEEP]
                    .into_iter()
                    .find(|k| *k == m)
                    .unwrap_or(MALFORMED)
            }),
        }
    }
}

impl JStr {
    fn push(&mut self, c: u8) {
        self.buf.push(c);
    }
    fn raw(&mut self, z: &[u8]) {
        self.buf.extend_from_slice(z);
    }
    fn too_deep(&mut self) {
        self.err |= JSTRING_TOODEEP;
        self.msg = Some(TOO_DEEP);
        self.buf.clear();
    }
    fn trim_one(&mut self) {
        if self.err == 0 {
            self.buf.pop();
        }
    }
    fn separator(&mut self) {
        match self.buf.last() {
            None | Some(b'[') | Some(b'{') => {}
            _ => self.push(b','),
        }
    }
    fn control_char(&mut self, c: u8) {
        const SPECIAL: [u8; 32] = [
            0, 0, 0, 0, 0, 0, 0, 0, b'b', b't', b'n', 0, b'f', b'r', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0,
        ];
        const HEX: &[u8; 16] = b"0123456789abcdef";
        if SPECIAL[c as usize] != 0 {
            self.raw(&[b'\\', SPECIAL[c as usize]]);
        } else {
            self.raw(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 0xf) as usize],
            ]);
        }
    }
    /// `jsonAppendString`.
    fn string(&mut self, z: &[u8]) {
        self.push(b'"');
        for &c in z {
            if is_ok(c) {
                self.push(c);
            } else if c == b'"' || c == b'\\' {
                self.raw(&[b'\\', c]);
            } else if c == b'\'' {
                self.push(c);
            } else {
                self.control_char(c);
            }
        }
        self.push(b'"');
    }
    /// `jsonAppendSqlValue`.
    fn sql_value(&mut self, a: JsonArg<'_>) {
        match a.value {
            ValueRef::Null => self.raw(b"null"),
            ValueRef::Real(r) => self.raw(sqlite_printf_real(r, true).as_bytes()),
            ValueRef::Integer(i) => self.raw(i.to_string().as_bytes()),
            ValueRef::Text(t) => {
                if a.json {
                    self.raw(t)
                } else {
                    self.string(t)
                }
            }
            ValueRef::Blob(b) => {
                if let Some(mut px) = arg_jsonb(b) {
                    px.blob_to_text(0, self);
                } else if self.err == 0 {
                    self.msg = Some(BLOB_ERR);
                    self.err = JSTRING_ERR;
                    self.buf.clear();
                }
            }
        }
    }
    /// `jsonReturnString`: the text (or, for a JSONB function, the blob it parses to).
    fn result(self, blob: bool) -> Result<Value, String> {
        if self.err == 0 {
            if blob {
                Ok(Value::Blob(string_as_blob(&self.buf)))
            } else {
                Ok(Value::Text(self.buf))
            }
        } else if self.err & JSTRING_TOODEEP != 0 {
            Err(self.msg.unwrap_or(TOO_DEEP).to_string())
        } else if self.err & JSTRING_MALFORMED != 0 {
            Err(MALFORMED.to_string())
        } else {
            Err(self.msg.unwrap_or(MALFORMED).to_string())
        }
    }
}

/// `jsonReturnStringAsBlob`: well-formed JSON text parsed to JSONB (errors ignored, as there).
fn string_as_blob(text: &[u8]) -> Vec<u8> {
    let mut px = Parse::new(text);
    px.text_to_blob(0);
    px.blob
}

// ---------------------------------------------------------------------------------------------
// JsonParse.

/// A `jsonLookupStep` outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Found(usize),
    NotFound,
    Error,
    NotArray,
    TooDeep,
    PathError,
}

/// `JsonParse`: the JSONB of one argument, the text it came from and the edit in progress.
struct Parse<'t> {
    blob: Vec<u8>,
    json: &'t [u8],
    i_err: usize,
    depth: u16,
    has_nonstd: bool,
    e_edit: u8,
    delta: i64,
    ins: Vec<u8>,
}

impl<'t> Parse<'t> {
    fn new(json: &'t [u8]) -> Parse<'t> {
        Parse {
            blob: Vec::new(),
            json,
            i_err: 0,
            depth: 0,
            has_nonstd: false,
            e_edit: 0,
            delta: 0,
            ins: Vec::new(),
        }
    }

    fn from_blob(blob: Vec<u8>) -> Parse<'static> {
        let mut p = Parse::new(&[]);
        p.blob = blob;
        p
    }

    fn z(&self, i: usize) -> u8 {
        at(self.json, i)
    }

    /// `jsonBlobAppendNode`.
    fn append_node(&mut self, t: u8, sz: usize, payload: Option<&[u8]>) {
        let sz64 = sz as u64;
        if sz64 <= 11 {
            self.blob.push(t | ((sz as u8) << 4));
        } else if sz64 <= 0xff {
            self.blob.extend_from_slice(&[t | 0xc0, sz as u8]);
        } else if sz64 <= 0xffff {
            self.blob
                .extend_from_slice(&[t | 0xd0, (sz >> 8) as u8, sz as u8]);
        } else {
            self.blob.extend_from_slice(&[
                t | 0xe0,
                (sz >> 24) as u8,
                (sz >> 16) as u8,
                (sz >> 8) as u8,
                sz as u8,
            ]);
        }
        if let Some(p) = payload {
            self.blob.extend_from_slice(&p[..sz]);
        }
    }

    /// `jsonBlobChangePayloadSize`: the change in header size.
    fn change_payload_size(&mut self, i: usize, sz: usize) -> i64 {
        let sz_type = self.blob[i] >> 4;
        let n_extra: usize = match sz_type {
            0..=11 => 0,
            12 => 1,
            13 => 2,
            14 => 4,
            _ => 8,
        };
        let n_needed: usize = if sz <= 11 {
            0
        } else if sz <= 0xff {
            1
        } else if sz <= 0xffff {
            2
        } else {
            4
        };
        if n_needed > n_extra {
            let d = n_needed - n_extra;
            self.blob.splice(i + 1..i + 1, vec![0u8; d]);
        } else if n_extra > n_needed {
            self.blob.drain(i + 1..i + 1 + (n_extra - n_needed));
        }
        let a = &mut self.blob;
        match n_needed {
            0 => a[i] = (a[i] & 0x0f) | ((sz as u8) << 4),
            1 => {
                a[i] = (a[i] & 0x0f) | 0xc0;
                a[i + 1] = sz as u8;
            }
            2 => {
                a[i] = (a[i] & 0x0f) | 0xd0;
                a[i + 1] = (sz >> 8) as u8;
                a[i + 2] = sz as u8;
            }
            _ => {
                a[i] = (a[i] & 0x0f) | 0xe0;
                a[i + 1] = (sz >> 24) as u8;
                a[i + 2] = (sz >> 16) as u8;
                a[i + 3] = (sz >> 8) as u8;
                a[i + 4] = sz as u8;
            }
        }
        n_needed as i64 - n_extra as i64
    }

    /// `jsonbPayloadSize`: the header size (0 on error) and the payload size.
    fn payload_size(&self, i: usize) -> (usize, usize) {
        self.payload_size_ex(i, true)
    }

    fn payload_size_ex(&self, i: usize, check_end: bool) -> (usize, usize) {
        let a = &self.blob;
        let nb = a.len();
        if i >= nb {
            return (0, 0);
        }
        let x = a[i] >> 4;
        let (sz, n): (u64, usize) = if x <= 11 {
            (u64::from(x), 1)
        } else if x == 12 {
            if i + 1 >= nb {
                return (0, 0);
            }
            (u64::from(a[i + 1]), 2)
        } else if x == 13 {
            if i + 2 >= nb {
                return (0, 0);
            }
            ((u64::from(a[i + 1]) << 8) + u64::from(a[i + 2]), 3)
        } else if x == 14 {
            if i + 4 >= nb {
                return (0, 0);
            }
            (
                (u64::from(a[i + 1]) << 24)
                    + (u64::from(a[i + 2]) << 16)
                    + (u64::from(a[i + 3]) << 8)
                    + u64::from(a[i + 4]),
                5,
            )
        } else {
            if i + 8 >= nb || a[i + 1] != 0 || a[i + 2] != 0 || a[i + 3] != 0 || a[i + 4] != 0 {
                return (0, 0);
            }
            (
                (u64::from(a[i + 5]) << 24)
                    + (u64::from(a[i + 6]) << 16)
                    + (u64::from(a[i + 7]) << 8)
                    + u64::from(a[i + 8]),
                9,
            )
        };
        let end = i as i64 + sz as i64 + n as i64;
        if check_end && end > nb as i64 && end > nb as i64 - self.delta {
            return (0, 0);
        }
        (n, sz as usize)
    }

    // -- text to JSONB ------------------------------------------------------------------------

    /// `jsonTranslateTextToBlob`: the index past the element, or 0 (end of input), -1 (error),
    /// -2 `}`, -3 `]`, -4 `,`, -5 `:` (with `i_err` at the character).
    fn text_to_blob(&mut self, mut i: usize) -> i64 {
        loop {
            let c = self.z(i);
            match c {
                b'{' => return self.text_object(i),
                b'[' => return self.text_array(i),
                b'\'' | b'"' => return self.text_string(i),
                b't' => {
                    if strnicmp_exact(self.json, i, b"true") && !is_alnum(self.z(i + 4)) {
                        self.blob.push(JSONB_TRUE);
                        return (i + 4) as i64;
                    }
                    self.i_err = i;
                    return -1;
                }
                b'f' => {
                    if strnicmp_exact(self.json, i, b"false") && !is_alnum(self.z(i + 5)) {
                        self.blob.push(JSONB_FALSE);
                        return (i + 5) as i64;
                    }
                    self.i_err = i;
                    return -1;
                }
                b'+' | b'.' | b'-' | b'0'..=b'9' => return self.text_number(i),
                b'}' => {
                    self.i_err = i;
                    return -2;
                }
                b']' => {
                    self.i_err = i;
                    return -3;
                }
                b',' => {
                    self.i_err = i;
                    return -4;
                }
                b':' => {
                    self.i_err = i;
                    return -5;
                }
                0 => return 0,
                0x09 | 0x0a | 0x0d | 0x20 => {
                    i += 1 + spaces(self.json, i + 1);
                    continue;
                }
                0x0b | 0x0c | b'/' | 0xc2 | 0xe1 | 0xe2 | 0xe3 | 0xef => {
                    let j = json5_whitespace(self.json, i);
                    if j > 0 {
                        i += j;
                        self.has_nonstd = true;
                        continue;
                    }
                    self.i_err = i;
                    return -1;
                }
                _ => {
                    if c == b'n'
                        && strnicmp_exact(self.json, i, b"null")
                        && !is_alnum(self.z(i + 4))
                    {
                        self.blob.push(JSONB_NULL);
                        return (i + 4) as i64;
                    }
                    return self.text_nan_inf(i);
                }
            }
        }
    }

    fn text_nan_inf(&mut self, i: usize) -> i64 {
        // aNanInfName
        const NAMES: [(u8, u8, &[u8], bool); 5] = [
            (b'i', b'I', b"inf", true),
            (b'i', b'I', b"infinity", true),
            (b'n', b'N', b"NaN", false),
            (b'q', b'Q', b"QNaN", false),
            (b's', b'S', b"SNaN", false),
        ];
        let c = self.z(i);
        for (c1, c2, m, float) in NAMES {
            if c != c1 && c != c2 {
                continue;
            }
            if !strnicmp(self.json, i, m) {
                continue;
            }
            if is_alnum(self.z(i + m.len())) {
                continue;
            }
            if float {
                self.append_node(JSONB_FLOAT, 5, Some(b"9e999"));
            } else {
                self.blob.push(JSONB_NULL);
            }
            self.has_nonstd = true;
            return (i + m.len()) as i64;
        }
        self.i_err = i;
        -1
    }

    fn text_object(&mut self, i: usize) -> i64 {
        let z = self.json;
        let i_this = self.blob.len();
        self.append_node(JSONB_OBJECT, self.json.len().saturating_sub(i), None);
        self.depth = self.depth.wrapping_add(1);
        if u32::from(self.depth) > JSON_MAX_DEPTH {
            self.i_err = i;
            return -1;
        }
        let i_start = self.blob.len();
        let mut j = i + 1;
        loop {
            let i_blob = self.blob.len();
            let mut x = self.text_to_blob(j);
            if x <= 0 {
                if x == -2 {
                    j = self.i_err;
                    if self.blob.len() != i_start {
                        self.has_nonstd = true;
                    }
                    break;
                }
                j += json5_whitespace(z, j);
                let mut op = JSONB_TEXT;
                let is4hexb = |k: usize, op: &mut u8| {
                    if at(z, k) != b'u' || !is_4hex(z, k + 1) {
                        return false;
                    }
                    *op = JSONB_TEXTJ;
                    true
                };
                if json_id1(at(z, j)) || (at(z, j) == b'\\' && is4hexb(j + 1, &mut op)) {
                    let mut k = j + 1;
                    while (json_id2(at(z, k)) && json5_whitespace(z, k) == 0)
                        || (at(z, k) == b'\\' && is4hexb(k + 1, &mut op))
                    {
                        k += 1;
                    }
                    self.append_node(op, k - j, Some(&z[j..k]));
                    self.has_nonstd = true;
                    x = k as i64;
                } else {
                    if x != -1 {
                        self.i_err = j;
                    }
                    return -1;
                }
            }
            let t = self.blob[i_blob] & 0x0f;
            if !(JSONB_TEXT..=JSONB_TEXTRAW).contains(&t) {
                self.i_err = j;
                return -1;
            }
            j = x as usize;
            let mut value_ready = false;
            if at(z, j) == b':' {
                j += 1;
            } else {
                if is_space(at(z, j)) {
                    loop {
                        j += 1;
                        if !is_space(at(z, j)) {
                            break;
                        }
                    }
                    if at(z, j) == b':' {
                        j += 1;
                        value_ready = true;
                    }
                }
                if !value_ready {
                    let x = self.text_to_blob(j);
                    if x != -5 {
                        if x != -1 {
                            self.i_err = j;
                        }
                        return -1;
                    }
                    j = self.i_err + 1;
                }
            }
            // parse_object_value:
            let x = self.text_to_blob(j);
            if x <= 0 {
                if x != -1 {
                    self.i_err = j;
                }
                return -1;
            }
            j = x as usize;
            if at(z, j) == b',' {
                j += 1;
                continue;
            } else if at(z, j) == b'}' {
                break;
            } else {
                if is_space(at(z, j)) {
                    j += 1 + spaces(z, j + 1);
                    if at(z, j) == b',' {
                        j += 1;
                        continue;
                    } else if at(z, j) == b'}' {
                        break;
                    }
                }
                let x = self.text_to_blob(j);
                if x == -4 {
                    j = self.i_err + 1;
                    continue;
                }
                if x == -2 {
                    j = self.i_err;
                    break;
                }
            }
            self.i_err = j;
            return -1;
        }
        let sz = self.blob.len() - i_start;
        self.change_payload_size(i_this, sz);
        self.depth = self.depth.wrapping_sub(1);
        (j + 1) as i64
    }

    fn text_array(&mut self, i: usize) -> i64 {
        let z = self.json;
        let i_this = self.blob.len();
        self.append_node(JSONB_ARRAY, self.json.len().saturating_sub(i), None);
        let i_start = self.blob.len();
        self.depth = self.depth.wrapping_add(1);
        if u32::from(self.depth) > JSON_MAX_DEPTH {
            self.i_err = i;
            return -1;
        }
        let mut j = i + 1;
        loop {
            let x = self.text_to_blob(j);
            if x <= 0 {
                if x == -3 {
                    j = self.i_err;
                    if self.blob.len() != i_start {
                        self.has_nonstd = true;
                    }
                    break;
                }
                if x != -1 {
                    self.i_err = j;
                }
                return -1;
            }
            j = x as usize;
            if at(z, j) == b',' {
                j += 1;
                continue;
            } else if at(z, j) == b']' {
                break;
            } else {
                if is_space(at(z, j)) {
                    j += 1 + spaces(z, j + 1);
                    if at(z, j) == b',' {
                        j += 1;
                        continue;
                    } else if at(z, j) == b']' {
                        break;
                    }
                }
                let x = self.text_to_blob(j);
                if x == -4 {
                    j = self.i_err + 1;
                    continue;
                }
                if x == -3 {
                    j = self.i_err;
                    break;
                }
            }
            self.i_err = j;
            return -1;
        }
        let sz = self.blob.len() - i_start;
        self.change_payload_size(i_this, sz);
        self.depth = self.depth.wrapping_sub(1);
        (j + 1) as i64
    }

    fn text_string(&mut self, i: usize) -> i64 {
        let z = self.json;
        let mut opcode = JSONB_TEXT;
        if at(z, i) == b'\'' {
            self.has_nonstd = true;
        }
        let delim = at(z, i);
        let mut j = i + 1;
        loop {
            if is_ok(at(z, j)) {
                if !is_ok(at(z, j + 1)) {
                    j += 1;
                } else if !is_ok(at(z, j + 2)) {
                    j += 2;
                } else {
                    j += 3;
                    continue;
                }
            }
            let mut c = at(z, j);
            if c == delim {
                break;
            } else if c == b'\\' {
                j += 1;
                c = at(z, j);
                if matches!(c, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't')
                    || (c == b'u' && is_4hex(z, j + 1))
                {
                    if opcode == JSONB_TEXT {
                        opcode = JSONB_TEXTJ;
                    }
                } else if c == b'\''
                    || c == b'v'
                    || c == b'\n'
                    || (c == b'0' && !is_digit(at(z, j + 1)))
                    || (c == 0xe2
                        && at(z, j + 1) == 0x80
                        && (at(z, j + 2) == 0xa8 || at(z, j + 2) == 0xa9))
                    || (c == b'x' && is_2hex(z, j + 1))
                {
                    opcode = JSONB_TEXT5;
                    self.has_nonstd = true;
                } else if c == b'\r' {
                    if at(z, j + 1) == b'\n' {
                        j += 1;
                    }
                    opcode = JSONB_TEXT5;
                    self.has_nonstd = true;
                } else {
                    self.i_err = j;
                    return -1;
                }
            } else if c <= 0x1f {
                if c == 0 {
                    self.i_err = j;
                    return -1;
                }
                opcode = JSONB_TEXT5;
                self.has_nonstd = true;
            } else if c == b'"' {
                opcode = JSONB_TEXT5;
            }
            j += 1;
        }
        self.append_node(opcode, j - 1 - i, Some(&z[i + 1..j]));
        (j + 1) as i64
    }

    fn text_number(&mut self, mut i: usize) -> i64 {
        let z = self.json;
        let mut t: u8;
        let mut seen_e = false;
        let mut j: usize;
        let c0 = at(z, i);
        // Entry: which of SQLite's labels this number starts at.
        let mut goto_2 = false;
        let mut goto_finish = false;
        j = i + 1;
        if c0 == b'.' {
            if is_digit(at(z, i + 1)) {
                self.has_nonstd = true;
                t = 0x03;
                goto_2 = true;
            } else {
                self.i_err = i;
                return -1;
            }
        } else {
            t = 0;
            if c0 == b'+' {
                self.has_nonstd = true;
            }
        }
        if !goto_2 {
            // parse_number:
            let c = at(z, i);
            if c <= b'0' {
                if c == b'0' {
                    if (at(z, i + 1) == b'x' || at(z, i + 1) == b'X') && is_xdigit(at(z, i + 2)) {
                        self.has_nonstd = true;
                        t = 0x01;
                        j = i + 3;
                        while is_xdigit(at(z, j)) {
                            j += 1;
                        }
                        goto_finish = true;
                    } else if is_digit(at(z, i + 1)) {
                        self.i_err = i + 1;
                        return -1;
                    }
                } else {
                    if !is_digit(at(z, i + 1)) {
                        if (at(z, i + 1) == b'I' || at(z, i + 1) == b'i')
                            && strnicmp(z, i + 1, b"inf")
                        {
                            self.has_nonstd = true;
                            if at(z, i) == b'-' {
                                self.append_node(JSONB_FLOAT, 6, Some(b"-9e999"));
                            } else {
                                self.append_node(JSONB_FLOAT, 5, Some(b"9e999"));
                            }
                            return (i + if strnicmp(z, i + 4, b"inity") { 9 } else { 4 }) as i64;
                        }
                        if at(z, i + 1) == b'.' {
                            self.has_nonstd = true;
                            t |= 0x01;
                        } else {
                            self.i_err = i;
                            return -1;
                        }
                    } else if at(z, i + 1) == b'0' {
                        if is_digit(at(z, i + 2)) {
                            self.i_err = i + 1;
                            return -1;
                        } else if (at(z, i + 2) == b'x' || at(z, i + 2) == b'X')
                            && is_xdigit(at(z, i + 3))
                        {
                            self.has_nonstd = true;
                            t |= 0x01;
                            j = i + 4;
                            while is_xdigit(at(z, j)) {
                                j += 1;
                            }
                            goto_finish = true;
                        }
                    }
                }
            }
        }
        if !goto_finish {
            // parse_number_2:
            j = i + 1;
            loop {
                let c = at(z, j);
                if is_digit(c) {
                    j += 1;
                    continue;
                }
                if c == b'.' {
                    if t & 0x02 != 0 {
                        self.i_err = j;
                        return -1;
                    }
                    t |= 0x02;
                    j += 1;
                    continue;
                }
                if c == b'e' || c == b'E' {
                    if at(z, j - 1) < b'0' {
                        if at(z, j - 1) == b'.' && j >= i + 2 && is_digit(at(z, j - 2)) {
                            self.has_nonstd = true;
                            t |= 0x01;
                        } else {
                            self.i_err = j;
                            return -1;
                        }
                    }
                    if seen_e {
                        self.i_err = j;
                        return -1;
                    }
                    t |= 0x02;
                    seen_e = true;
                    let mut c = at(z, j + 1);
                    if c == b'+' || c == b'-' {
                        j += 1;
                        c = at(z, j + 1);
                    }
                    if !c.is_ascii_digit() {
                        self.i_err = j;
                        return -1;
                    }
                    j += 1;
                    continue;
                }
                break;
            }
            if at(z, j - 1) < b'0' {
                if at(z, j - 1) == b'.' && j >= i + 2 && is_digit(at(z, j - 2)) {
                    self.has_nonstd = true;
                    t |= 0x01;
                } else {
                    self.i_err = j;
                    return -1;
                }
            }
        }
        // parse_number_finish:
        if at(z, i) == b'+' {
            i += 1;
        }
        self.append_node(JSONB_INT + t, j - i, Some(&z[i..j]));
        j as i64
    }

    /// `jsonConvertTextToBlob`: whether the whole text is one JSON value.
    fn convert_text(&mut self) -> bool {
        let mut i = self.text_to_blob(0);
        if i > 0 {
            let mut k = i as usize;
            while is_space(self.z(k)) {
                k += 1;
            }
            if self.z(k) != 0 {
                k += json5_whitespace(self.json, k);
                if self.z(k) != 0 {
                    return false;
                }
                self.has_nonstd = true;
            }
            i = k as i64;
        }
        i > 0
    }

    // -- JSONB to text ------------------------------------------------------------------------

    /// `jsonTranslateBlobToText`: renders the element at `i`, returns the index past it.
    fn blob_to_text(&mut self, i: usize, out: &mut JStr) -> usize {
        let (n, sz) = self.payload_size(i);
        if n == 0 {
            out.err |= JSTRING_MALFORMED;
            return self.blob.len() + 1;
        }
        let p = i + n;
        match self.blob[i] & 0x0f {
            JSONB_NULL => {
                out.raw(b"null");
                return i + 1;
            }
            JSONB_TRUE => {
                out.raw(b"true");
                return i + 1;
            }
            JSONB_FALSE => {
                out.raw(b"false");
                return i + 1;
            }
            JSONB_INT | JSONB_FLOAT => {
                if sz == 0 {
                    out.err |= JSTRING_MALFORMED;
                } else {
                    out.raw(&self.blob[p..p + sz]);
                }
            }
            JSONB_INT5 => {
                if sz == 0 {
                    out.err |= JSTRING_MALFORMED;
                } else {
                    let z = &self.blob[p..p + sz];
                    let mut k = 2;
                    let mut u: u64 = 0;
                    let mut overflow = false;
                    if z[0] == b'-' {
                        out.push(b'-');
                        k += 1;
                    } else if z[0] == b'+' {
                        k += 1;
                    }
                    while k < sz {
                        if !is_xdigit(z[k]) {
                            out.err |= JSTRING_MALFORMED;
                            break;
                        } else if (u >> 60) != 0 {
                            overflow = true;
                        } else {
                            u = u * 16 + u64::from(hex_to_int(z[k]));
                        }
                        k += 1;
                    }
                    if overflow {
                        out.raw(b"9.0e999");
                    } else {
                        out.raw(u.to_string().as_bytes());
                    }
                }
            }
            JSONB_FLOAT5 => {
                if sz == 0 {
                    out.err |= JSTRING_MALFORMED;
                } else {
                    let z = &self.blob[p..p + sz];
                    let mut k = 0;
                    let mut bad = false;
                    if z[0] == b'-' {
                        out.push(b'-');
                        if sz <= 1 {
                            bad = true;
                        }
                        k = 1;
                    }
                    if bad {
                        out.err |= JSTRING_MALFORMED;
                    } else {
                        if z[k] == b'.' {
                            out.push(b'0');
                        }
                        while k < sz {
                            out.push(z[k]);
                            if z[k] == b'.' && (k + 1 == sz || !is_digit(z[k + 1])) {
                                out.push(b'0');
                            }
                            k += 1;
                        }
                    }
                }
            }
            JSONB_TEXT | JSONB_TEXTJ => {
                out.push(b'"');
                out.raw(&self.blob[p..p + sz]);
                out.push(b'"');
            }
            JSONB_TEXT5 => {
                let mut z = &self.blob[p..p + sz];
                out.push(b'"');
                while !z.is_empty() {
                    let k = z.iter().take_while(|&&c| is_ok(c) || c == b'\'').count();
                    if k > 0 {
                        out.raw(&z[..k]);
                        if k >= z.len() {
                            break;
                        }
                        z = &z[k..];
                    }
                    if z[0] == b'"' {
                        out.raw(b"\\\"");
                        z = &z[1..];
                        continue;
                    }
                    if z[0] <= 0x1f {
                        out.control_char(z[0]);
                        z = &z[1..];
                        continue;
                    }
                    if z.len() < 2 {
                        out.err |= JSTRING_MALFORMED;
                        break;
                    }
                    let mut skip = 2;
                    match z[1] {
                        b'\'' => out.push(b'\''),
                        b'v' => out.raw(b"\\u000b"),
                        b'x' => {
                            if z.len() < 4 {
                                out.err |= JSTRING_MALFORMED;
                            } else {
                                out.raw(b"\\u00");
                                out.raw(&z[2..4]);
                                skip = 4;
                            }
                        }
                        b'0' => out.raw(b"\\u0000"),
                        b'\r' => {
                            if z.len() > 2 && z[2] == b'\n' {
                                skip = 3;
                            }
                        }
                        b'\n' => {}
                        0xe2 => {
                            if z.len() < 4 || z[2] != 0x80 || (z[3] != 0xa8 && z[3] != 0xa9) {
                                out.err |= JSTRING_MALFORMED;
                            } else {
                                skip = 4;
                            }
                        }
                        _ => out.raw(&z[..2]),
                    }
                    z = &z[skip..];
                }
                out.push(b'"');
            }
            JSONB_TEXTRAW => {
                let z = self.blob[p..p + sz].to_vec();
                out.string(&z);
            }
            JSONB_ARRAY => {
                out.push(b'[');
                let mut j = p;
                let end = p + sz;
                self.depth = self.depth.wrapping_add(1);
                if u32::from(self.depth) > JSON_MAX_DEPTH {
                    out.too_deep();
                }
                while j < end && out.err == 0 {
                    j = self.blob_to_text(j, out);
                    out.push(b',');
                }
                self.depth = self.depth.wrapping_sub(1);
                if j > end {
                    out.err |= JSTRING_MALFORMED;
                }
                if sz > 0 {
                    out.trim_one();
                }
                out.push(b']');
            }
            JSONB_OBJECT => {
                let mut x = 0u32;
                out.push(b'{');
                let mut j = p;
                let end = p + sz;
                self.depth = self.depth.wrapping_add(1);
                if u32::from(self.depth) > JSON_MAX_DEPTH {
                    out.too_deep();
                }
                while j < end && out.err == 0 {
                    j = self.blob_to_text(j, out);
                    out.push(if x & 1 != 0 { b',' } else { b':' });
                    x += 1;
                }
                self.depth = self.depth.wrapping_sub(1);
                if (x & 1) != 0 || j > end {
                    out.err |= JSTRING_MALFORMED;
                }
                if sz > 0 {
                    out.trim_one();
                }
                out.push(b'}');
            }
            _ => out.err |= JSTRING_MALFORMED,
        }
        i + n + sz
    }

    /// `jsonTranslateBlobToPrettyText`.
    fn blob_to_pretty(
        &mut self,
        i: usize,
        out: &mut JStr,
        indent: &[u8],
        n_indent: &mut u32,
    ) -> usize {
        let (n, sz) = self.payload_size(i);
        if n == 0 {
            out.err |= JSTRING_MALFORMED;
            return self.blob.len() + 1;
        }
        let put_indent = |out: &mut JStr, k: u32| {
            for _ in 0..k {
                out.raw(indent);
            }
        };
        match self.blob[i] & 0x0f {
            JSONB_ARRAY => {
                let mut j = i + n;
                let end = j + sz;
                out.push(b'[');
                if j < end {
                    out.push(b'\n');
                    *n_indent += 1;
                    if *n_indent >= JSON_MAX_DEPTH {
                        out.too_deep();
                    }
                    while out.err == 0 {
                        put_indent(out, *n_indent);
                        j = self.blob_to_pretty(j, out, indent, n_indent);
                        if j >= end {
                            if j > end {
                                out.err |= JSTRING_MALFORMED;
                            }
                            break;
                        }
                        out.raw(b",\n");
                    }
                    out.push(b'\n');
                    *n_indent -= 1;
                    put_indent(out, *n_indent);
                }
                out.push(b']');
                end
            }
            JSONB_OBJECT => {
                let mut j = i + n;
                let end = j + sz;
                out.push(b'{');
                if j < end {
                    out.push(b'\n');
                    *n_indent += 1;
                    if *n_indent >= JSON_MAX_DEPTH {
                        out.too_deep();
                    }
                    self.depth = *n_indent as u16;
                    while out.err == 0 {
                        put_indent(out, *n_indent);
                        j = self.blob_to_text(j, out);
                        if j > end {
                            out.err |= JSTRING_MALFORMED;
                            break;
                        }
                        out.raw(b": ");
                        j = self.blob_to_pretty(j, out, indent, n_indent);
                        if j >= end {
                            break;
                        }
                        out.raw(b",\n");
                    }
                    out.push(b'\n');
                    *n_indent -= 1;
                    put_indent(out, *n_indent);
                }
                out.push(b'}');
                end
            }
            _ => self.blob_to_text(i, out),
        }
    }

    /// `jsonbArrayCount`.
    fn array_count(&self, root: usize) -> i64 {
        let (mut n, sz) = self.payload_size(root);
        let end = root + n + sz;
        let mut k = 0;
        let mut i = root + n;
        while n > 0 && i < end {
            let (n2, sz2) = self.payload_size(i);
            n = n2;
            i += sz2 + n2;
            k += 1;
        }
        k
    }

    /// `jsonAfterEditSizeAdjust`.
    fn after_edit_size_adjust(&mut self, root: usize) {
        let (_, sz) = self.payload_size_ex(root, false);
        let sz = (sz as i64 + self.delta).max(0) as usize;
        self.delta += self.change_payload_size(root, sz);
    }

    /// `jsonBlobEdit`.
    fn blob_edit(&mut self, i_del: usize, n_del: usize, ins: Option<&[u8]>, n_ins: usize) {
        let d = n_ins as i64 - n_del as i64;
        if (-8..0).contains(&d) {
            if let Some(ins) = ins {
                if let Some(over) = blob_overwrite(ins, (-d) as usize) {
                    self.blob[i_del..i_del + over.len()].copy_from_slice(&over);
                    return;
                }
            }
        }
        let fill: Vec<u8> = match ins {
            Some(x) if n_ins > 0 => x[..n_ins].to_vec(),
            _ => vec![0u8; n_ins],
        };
        self.blob.splice(i_del..i_del + n_del, fill);
        self.delta += d;
    }

    /// `jsonLookupStep` on `path[off..]` (`path` is the whole path after `$`, so that the
    /// character before `off` can be read).
    fn lookup_step(&mut self, root: usize, path: &[u8], off: usize, label: usize) -> Lookup {
        let zp = |k: usize| at(path, off + k);
        if zp(0) == 0 {
            if self.e_edit != 0 {
                let (n, mut sz) = self.payload_size(root);
                sz += n;
                let mut root = root;
                match self.e_edit {
                    JEDIT_DEL => {
                        if label > 0 {
                            sz += root - label;
                            root = label;
                        }
                        self.blob_edit(root, sz, None, 0);
                    }
                    JEDIT_INS => {}
                    JEDIT_AINS => {
                        if off == 0 || path[off - 1] != b']' {
                            return Lookup::NotArray;
                        }
                        let ins = std::mem::take(&mut self.ins);
                        self.blob_edit(root, 0, Some(&ins), ins.len());
                        self.ins = ins;
                    }
                    _ => {
                        let ins = std::mem::take(&mut self.ins);
                        self.blob_edit(root, sz, Some(&ins), ins.len());
                        self.ins = ins;
                    }
                }
            }
            return Lookup::Found(root);
        }
        if zp(0) == b'.' {
            let mut raw_key = true;
            let x = self.blob.get(root).copied().unwrap_or(0);
            let key_start;
            let n_key;
            let mut i;
            if zp(1) == b'"' {
                key_start = off + 2;
                i = 1;
                while zp(1 + i) != 0 && zp(1 + i) != b'"' {
                    if zp(1 + i) == b'\\' && zp(2 + i) != 0 {
                        i += 1;
                    }
                    i += 1;
                }
                n_key = i - 1;
                if zp(1 + i) != 0 {
                    i += 1;
                } else {
                    return Lookup::PathError;
                }
                raw_key = !path[key_start..key_start + n_key].contains(&b'\\');
            } else {
                key_start = off + 1;
                i = 0;
                while zp(1 + i) != 0 && zp(1 + i) != b'.' && zp(1 + i) != b'[' {
                    i += 1;
                }
                n_key = i;
                if n_key == 0 {
                    return Lookup::PathError;
                }
            }
            let rest = off + 1 + i;
            let key = &path[key_start..key_start + n_key];
            if (x & 0x0f) != JSONB_OBJECT {
                return Lookup::NotFound;
            }
            let (n, sz) = self.payload_size(root);
            let mut j = root + n;
            let end = j + sz;
            while j < end {
                let x = self.blob[j] & 0x0f;
                if !(JSONB_TEXT..=JSONB_TEXTRAW).contains(&x) {
                    return Lookup::Error;
                }
                let (n, sz) = self.payload_size(j);
                if n == 0 {
                    return Lookup::Error;
                }
                let k = j + n;
                if k + sz >= end {
                    return Lookup::Error;
                }
                let raw_label = x == JSONB_TEXT || x == JSONB_TEXTRAW;
                if label_compare(key, raw_key, &self.blob[k..k + sz], raw_label) {
                    let v = k + sz;
                    if (self.blob[v] & 0x0f) > JSONB_OBJECT {
                        return Lookup::Error;
                    }
                    let (n, sz) = self.payload_size(v);
                    if n == 0 || v + n + sz > end {
                        return Lookup::Error;
                    }
                    self.depth = self.depth.wrapping_add(1);
                    if u32::from(self.depth) >= JSON_MAX_DEPTH {
                        return Lookup::TooDeep;
                    }
                    let rc = self.lookup_step(v, path, rest, j);
                    self.depth = self.depth.wrapping_sub(1);
                    if self.delta != 0 {
                        self.after_edit_size_adjust(root);
                    }
                    return rc;
                }
                j = k + sz;
                if (self.blob[j] & 0x0f) > JSONB_OBJECT {
                    return Lookup::Error;
                }
                let (n, sz) = self.payload_size(j);
                if n == 0 {
                    return Lookup::Error;
                }
                j += n + sz;
            }
            if j > end {
                return Lookup::Error;
            }
            if self.e_edit >= JEDIT_INS {
                if self.e_edit == JEDIT_AINS && !path[rest.min(path.len())..].ends_with(b"]") {
                    return Lookup::NotArray;
                }
                let mut ix = Parse::new(&[]);
                ix.append_node(
                    if raw_key { JSONB_TEXTRAW } else { JSONB_TEXT5 },
                    n_key,
                    None,
                );
                let (rc, v) = self.create_edit_substructure(path, rest);
                if !is_lookup_error(rc) {
                    let mut ins = ix.blob.clone();
                    ins.extend_from_slice(key);
                    ins.extend_from_slice(&v);
                    let n_ins = ins.len();
                    self.blob_edit(j, 0, Some(&ins), n_ins);
                    if self.delta != 0 {
                        self.after_edit_size_adjust(root);
                    }
                }
                return rc;
            }
        } else if zp(0) == b'[' {
            let x = self.blob.get(root).copied().unwrap_or(0) & 0x0f;
            if x != JSONB_ARRAY {
                return Lookup::NotFound;
            }
            let (n, sz) = self.payload_size(root);
            let mut kk: u64 = 0;
            let mut i = 1;
            while is_digit(zp(i)) {
                if kk < 0xffff_ffff {
                    kk = kk * 10 + u64::from(zp(i) - b'0');
                }
                i += 1;
            }
            if i < 2 || zp(i) != b']' {
                if zp(1) == b'#' {
                    kk = self.array_count(root) as u64;
                    i = 2;
                    if zp(2) == b'-' && is_digit(zp(3)) {
                        let mut nn: u64 = 0;
                        i = 3;
                        loop {
                            if nn < 0xffff_ffff {
                                nn = nn * 10 + u64::from(zp(i) - b'0');
                            }
                            i += 1;
                            if !is_digit(zp(i)) {
                                break;
                            }
                        }
                        if nn > kk {
                            return Lookup::NotFound;
                        }
                        kk -= nn;
                    }
                    if zp(i) != b']' {
                        return Lookup::PathError;
                    }
                } else {
                    return Lookup::PathError;
                }
            }
            let mut j = root + n;
            let end = j + sz;
            while j < end {
                if kk == 0 {
                    self.depth = self.depth.wrapping_add(1);
                    if u32::from(self.depth) >= JSON_MAX_DEPTH {
                        return Lookup::TooDeep;
                    }
                    let rc = self.lookup_step(j, path, off + i + 1, 0);
                    self.depth = self.depth.wrapping_sub(1);
                    if self.delta != 0 {
                        self.after_edit_size_adjust(root);
                    }
                    return rc;
                }
                kk -= 1;
                let (n, sz) = self.payload_size(j);
                if n == 0 {
                    return Lookup::Error;
                }
                j += n + sz;
            }
            if j > end {
                return Lookup::Error;
            }
            if kk > 0 {
                return Lookup::NotFound;
            }
            if self.e_edit >= JEDIT_INS {
                let (rc, v) = self.create_edit_substructure(path, off + i + 1);
                if !is_lookup_error(rc) {
                    let nv = v.len();
                    self.blob_edit(j, 0, Some(&v), nv);
                }
                if self.delta != 0 {
                    self.after_edit_size_adjust(root);
                }
                return rc;
            }
        } else {
            return Lookup::PathError;
        }
        Lookup::NotFound
    }

    /// `jsonCreateEditSubstructure`: the code and the JSONB to insert for `path[off..]`.
    fn create_edit_substructure(&mut self, path: &[u8], off: usize) -> (Lookup, Vec<u8>) {
        if at(path, off) == 0 {
            return (Lookup::Found(0), self.ins.clone());
        }
        let mut pins = Parse::new(&[]);
        pins.blob = vec![if at(path, off) == b'.' {
            JSONB_OBJECT
        } else {
            JSONB_ARRAY
        }];
        pins.e_edit = self.e_edit;
        pins.ins = self.ins.clone();
        pins.depth = self.depth.wrapping_add(1);
        if u32::from(pins.depth) >= JSON_MAX_DEPTH {
            return (Lookup::TooDeep, Vec::new());
        }
        let rc = pins.lookup_step(0, path, off, 0);
        self.depth = self.depth.wrapping_sub(1);
        (rc, pins.blob)
    }

    // -- values -------------------------------------------------------------------------------

    /// `jsonReturnFromBlob`: the element at `i` as an SQL value (`mode` 1 text, 2 JSONB for
    /// arrays and objects).
    fn return_from_blob(&mut self, i: usize, mode: u8) -> Result<Value, String> {
        let malformed = || Err(MALFORMED.to_string());
        let (mut n, mut sz) = self.payload_size(i);
        if n == 0 {
            return malformed();
        }
        let t = self.blob[i] & 0x0f;
        let to_double = |z: &[u8]| -> Result<Value, String> {
            let z = cstr(z);
            let (rc, r) = atof(z);
            if rc <= 0 {
                return Err(MALFORMED.to_string());
            }
            Ok(Value::real(r))
        };
        match t {
            JSONB_NULL | JSONB_TRUE | JSONB_FALSE => {
                if sz != 0 {
                    return malformed();
                }
                Ok(match t {
                    JSONB_NULL => Value::Null,
                    JSONB_TRUE => Value::Integer(1),
                    _ => Value::Integer(0),
                })
            }
            JSONB_INT | JSONB_INT5 => {
                if sz == 0 {
                    return malformed();
                }
                let mut neg = false;
                if self.blob[i + n] == b'-' {
                    if sz < 2 {
                        return malformed();
                    }
                    n += 1;
                    sz -= 1;
                    neg = true;
                }
                let z = cstr(&self.blob[i + n..i + n + sz]);
                let (rc, ires) = dec_or_hex(z);
                if rc == 0 {
                    if ires < 0 {
                        let r = ires as u64 as f64;
                        Ok(Value::real(if neg { -r } else { r }))
                    } else {
                        Ok(Value::Integer(if neg { -ires } else { ires }))
                    }
                } else if rc == 3 && neg {
                    Ok(Value::Integer(i64::MIN))
                } else if rc == 1 {
                    malformed()
                } else {
                    if neg {
                        n -= 1;
                        sz += 1;
                    }
                    to_double(&self.blob[i + n..i + n + sz])
                }
            }
            JSONB_FLOAT | JSONB_FLOAT5 => {
                if sz == 0 {
                    return malformed();
                }
                to_double(&self.blob[i + n..i + n + sz])
            }
            JSONB_TEXT | JSONB_TEXTRAW => Ok(Value::Text(self.blob[i + n..i + n + sz].to_vec())),
            JSONB_TEXTJ | JSONB_TEXT5 => {
                let z = &self.blob[i + n..i + n + sz];
                let mut out = Vec::with_capacity(sz);
                let mut k = 0;
                while k < sz {
                    let c = z[k];
                    if c == b'\\' {
                        let (v, esc) = unescape_one_char(&z[k..], sz - k);
                        if v <= 0x7f {
                            out.push(v as u8);
                        } else if v <= 0x7ff {
                            out.push((0xc0 | (v >> 6)) as u8);
                            out.push((0x80 | (v & 0x3f)) as u8);
                        } else if v < 0x10000 {
                            out.push((0xe0 | (v >> 12)) as u8);
                            out.push((0x80 | ((v >> 6) & 0x3f)) as u8);
                            out.push((0x80 | (v & 0x3f)) as u8);
                        } else if v == JSON_INVALID_CHAR {
                        } else {
                            out.push((0xf0 | (v >> 18)) as u8);
                            out.push((0x80 | ((v >> 12) & 0x3f)) as u8);
                            out.push((0x80 | ((v >> 6) & 0x3f)) as u8);
                            out.push((0x80 | (v & 0x3f)) as u8);
                        }
                        k += esc;
                    } else {
                        out.push(c);
                        k += 1;
                    }
                }
                Ok(Value::Text(out))
            }
            JSONB_ARRAY | JSONB_OBJECT => {
                if mode == 2 {
                    Ok(Value::Blob(self.blob[i..i + n + sz].to_vec()))
                } else {
                    let mut x = Parse::from_blob(self.blob[i..i + n + sz].to_vec());
                    let mut s = JStr::default();
                    x.blob_to_text(0, &mut s);
                    s.result(false)
                }
            }
            _ => malformed(),
        }
    }
}

/// A C string's bytes: up to the first NUL.
fn cstr(z: &[u8]) -> &[u8] {
    match z.iter().position(|&b| b == 0) {
        Some(p) => &z[..p],
        None => z,
    }
}

/// `sqlite3DecOrHexToI64`.
fn dec_or_hex(z: &[u8]) -> (i32, i64) {
    if z.len() >= 2 && z[0] == b'0' && (z[1] == b'x' || z[1] == b'X') {
        return dec_or_hex_to_i64(&String::from_utf8_lossy(z));
    }
    let mut n = z
        .iter()
        .take_while(|&&b| matches!(b, b'+' | b'-' | b' ' | b'\n' | b'\t' | b'0'..=b'9'))
        .count();
    if n < z.len() {
        n += 1;
    }
    atoi64(&z[..n])
}

fn strnicmp_exact(z: &[u8], i: usize, pat: &[u8]) -> bool {
    pat.iter().enumerate().all(|(k, &p)| at(z, i + k) == p)
}

fn is_lookup_error(l: Lookup) -> bool {
    !matches!(l, Lookup::Found(_))
}

/// `jsonBlobOverwrite`: `ins` with its header widened by `d` bytes, if that is possible.
fn blob_overwrite(ins: &[u8], d: usize) -> Option<Vec<u8>> {
    const TYPES: [u8; 8] = [0xc0, 0xd0, 0, 0xe0, 0, 0, 0, 0xf0];
    if (ins[0] & 0x0f) <= 2 {
        return None;
    }
    let (mut i, sz_hdr) = match ins[0] >> 4 {
        12 => {
            if ((1u32 << d) & 0x8a) == 0 {
                return None;
            }
            (d + 2, 2)
        }
        13 => {
            if d != 2 && d != 6 {
                return None;
            }
            (d + 3, 3)
        }
        14 => {
            if d != 4 {
                return None;
            }
            (9, 5)
        }
        15 => return None,
        _ => {
            if ((1u32 << d) & 0x116) == 0 {
                return None;
            }
            (d + 1, 1)
        }
    };
    let mut out = vec![0u8; ins.len() + d];
    out[0] = (ins[0] & 0x0f) | TYPES[i - 2];
    out[i..].copy_from_slice(&ins[sz_hdr..]);
    let mut sz = (ins.len() - sz_hdr) as u64;
    loop {
        i -= 1;
        out[i] = (sz & 0xff) as u8;
        if i == 1 {
            break;
        }
        sz >>= 8;
    }
    Some(out)
}

/// `jsonbValidityCheck`: 0, or the 1-based offset of the first error.
fn validity_check(p: &Parse<'_>, i: usize, end: usize, depth: u32) -> usize {
    if depth > JSON_MAX_DEPTH {
        return i + 1;
    }
    let (n, sz) = p.payload_size(i);
    if n == 0 || i + n + sz != end {
        return i + 1;
    }
    let z = &p.blob;
    let x = z[i] & 0x0f;
    let zb = |k: usize| at(z, k);
    match x {
        JSONB_NULL | JSONB_TRUE | JSONB_FALSE => {
            if n + sz == 1 {
                0
            } else {
                i + 1
            }
        }
        JSONB_INT => {
            if sz < 1 {
                return i + 1;
            }
            let mut j = i + n;
            if zb(j) == b'-' {
                j += 1;
                if sz < 2 {
                    return i + 1;
                }
            }
            let k = i + n + sz;
            while j < k {
                if is_digit(zb(j)) {
                    j += 1;
                } else {
                    return j + 1;
                }
            }
            0
        }
        JSONB_INT5 => {
            if sz < 3 {
                return i + 1;
            }
            let mut j = i + n;
            if zb(j) == b'-' {
                if sz < 4 {
                    return i + 1;
                }
                j += 1;
            }
            if zb(j) != b'0' {
                return i + 1;
            }
            if zb(j + 1) != b'x' && zb(j + 1) != b'X' {
                return j + 2;
            }
            j += 2;
            let k = i + n + sz;
            while j < k {
                if is_xdigit(zb(j)) {
                    j += 1;
                } else {
                    return j + 1;
                }
            }
            0
        }
        JSONB_FLOAT | JSONB_FLOAT5 => {
            let mut seen = 0u8;
            if sz < 2 {
                return i + 1;
            }
            let mut j = i + n;
            let k = j + sz;
            if zb(j) == b'-' {
                j += 1;
                if sz < 3 {
                    return i + 1;
                }
            }
            if zb(j) == b'.' {
                if x == JSONB_FLOAT {
                    return j + 1;
                }
                if !is_digit(zb(j + 1)) {
                    return j + 1;
                }
                j += 2;
                seen = 1;
            } else if zb(j) == b'0' && x == JSONB_FLOAT {
                if j + 3 > k {
                    return j + 1;
                }
                if zb(j + 1) != b'.' && zb(j + 1) != b'e' && zb(j + 1) != b'E' {
                    return j + 1;
                }
                j += 1;
            }
            while j < k {
                let c = zb(j);
                if is_digit(c) {
                    j += 1;
                    continue;
                }
                if c == b'.' {
                    if seen > 0 {
                        return j + 1;
                    }
                    if x == JSONB_FLOAT && (j == k - 1 || !is_digit(zb(j + 1))) {
                        return j + 1;
                    }
                    seen = 1;
                    j += 1;
                    continue;
                }
                if c == b'e' || c == b'E' {
                    if seen == 2 {
                        return j + 1;
                    }
                    if j == k - 1 {
                        return j + 1;
                    }
                    if zb(j + 1) == b'+' || zb(j + 1) == b'-' {
                        j += 1;
                        if j == k - 1 {
                            return j + 1;
                        }
                    }
                    seen = 2;
                    j += 1;
                    continue;
                }
                return j + 1;
            }
            if seen == 0 {
                return i + 1;
            }
            0
        }
        JSONB_TEXT => {
            let mut j = i + n;
            let k = j + sz;
            while j < k {
                if !is_ok(zb(j)) && zb(j) != b'\'' {
                    return j + 1;
                }
                j += 1;
            }
            0
        }
        JSONB_TEXTJ | JSONB_TEXT5 => {
            let mut j = i + n;
            let k = j + sz;
            while j < k {
                let c = zb(j);
                if !is_ok(c) && c != b'\'' {
                    if c == b'"' || c <= 0x1f {
                        // Quotes and control characters are JSON5-only.
                        if x == JSONB_TEXTJ {
                            return j + 1;
                        }
                    } else if c != b'\\' || j + 1 >= k {
                        return j + 1;
                    } else if b"\"\\/bfnrt\0".contains(&zb(j + 1)) {
                        // strchr() also finds the terminating NUL.
                        j += 1;
                    } else if zb(j + 1) == b'u' {
                        if j + 5 >= k {
                            return j + 1;
                        }
                        if !is_4hex(z, j + 2) {
                            return j + 1;
                        }
                        j += 1;
                    } else if x != JSONB_TEXT5 {
                        return j + 1;
                    } else {
                        let (c, szc) = unescape_one_char(&z[j..k], k - j);
                        if c == JSON_INVALID_CHAR {
                            return j + 1;
                        }
                        j += szc - 1;
                    }
                }
                j += 1;
            }
            0
        }
        JSONB_TEXTRAW => 0,
        JSONB_ARRAY => {
            let mut j = i + n;
            let k = j + sz;
            while j < k {
                let (n, sz) = p.payload_size(j);
                if n == 0 {
                    return j + 1;
                }
                if j + n + sz > k {
                    return j + 1;
                }
                let sub = validity_check(p, j, j + n + sz, depth + 1);
                if sub != 0 {
                    return sub;
                }
                j += n + sz;
            }
            0
        }
        JSONB_OBJECT => {
            let mut cnt = 0u32;
            let mut j = i + n;
            let k = j + sz;
            while j < k {
                let (n, sz) = p.payload_size(j);
                if n == 0 {
                    return j + 1;
                }
                if j + n + sz > k {
                    return j + 1;
                }
                if cnt & 1 == 0 {
                    let x = z[j] & 0x0f;
                    if !(JSONB_TEXT..=JSONB_TEXTRAW).contains(&x) {
                        return j + 1;
                    }
                }
                let sub = validity_check(p, j, j + n + sz, depth + 1);
                if sub != 0 {
                    return sub;
                }
                cnt += 1;
                j += n + sz;
            }
            if cnt & 1 != 0 {
                return j + 1;
            }
            0
        }
        _ => i + 1,
    }
}

/// `jsonArgIsJsonb`: the blob as a parse when it looks like JSONB.
fn arg_jsonb(b: &[u8]) -> Option<Parse<'static>> {
    if b.is_empty() {
        return None;
    }
    let p = Parse::from_blob(b.to_vec());
    let c = b[0];
    if (c & 0x0f) > JSONB_OBJECT {
        return None;
    }
    let (n, sz) = p.payload_size(0);
    if n == 0 || sz + n != b.len() {
        return None;
    }
    if (c & 0x0f) <= JSONB_FALSE && sz != 0 {
        return None;
    }
    if sz > 7 || (c != 0x7b && c != 0x5b && !is_digit(c)) || validity_check(&p, 0, b.len(), 1) == 0
    {
        Some(p)
    } else {
        None
    }
}

/// Whether JSONB holds a JSON5 hexadecimal integer (whose rendering always moves SQLite's
/// output buffer to the heap, so the output is cached).
fn has_int5(b: &[u8]) -> bool {
    let p = Parse::from_blob(b.to_vec());
    let mut i = 0;
    while i < b.len() {
        let (n, sz) = p.payload_size(i);
        if n == 0 {
            return false;
        }
        match b[i] & 0x0f {
            JSONB_INT5 => return true,
            JSONB_ARRAY | JSONB_OBJECT => i += n,
            _ => i += n + sz,
        }
    }
    false
}

/// Refusal when it cannot be told whether SQLite read an argument through its parse cache.
const CACHE_UNSURE: &str =
    "corescan: cannot tell whether SQLite reads this JSON argument through its parse cache (refused)";

/// `jsonParseFuncArg`, with SQLite's parse cache as far as one nested call shows it: text an
/// edit function returned ([`JsonArg::jsonb`]) is read as the JSONB it was rendered from when
/// SQLite cached it (its output buffer left the 100-byte static space: 100 bytes or more, or a
/// hexadecimal integer rendered), parsed afresh when it cannot have been cached (under 93
/// bytes without one), refused in between unless both readings are the same. `Ok(None)` for
/// NULL.
fn parse_func_arg(a: JsonArg<'_>) -> Result<Option<Parse<'static>>, String> {
    if let (ValueRef::Text(text), Some(b)) = (a.value, a.jsonb) {
        if !text.is_empty() {
            let cached = if text.len() >= 100 || has_int5(b) {
                true
            } else if text.len() < 93 {
                false
            } else {
                let mut fresh = Parse::new(text);
                if !fresh.convert_text() || fresh.blob != b {
                    return Err(CACHE_UNSURE.to_string());
                }
                true
            };
            if cached {
                return Ok(Some(Parse::from_blob(b.to_vec())));
            }
        }
    }
    let v = a.value;
    if let ValueRef::Blob(b) = v {
        if let Some(p) = arg_jsonb(b) {
            return Ok(Some(p));
        }
    }
    let Some(text) = value_text(v) else {
        return Ok(None);
    };
    if text.is_empty() {
        return Err(MALFORMED.to_string());
    }
    let mut p = Parse::new(&text);
    if !p.convert_text() {
        return Err(MALFORMED.to_string());
    }
    let blob = std::mem::take(&mut p.blob);
    let nonstd = p.has_nonstd;
    let mut out = Parse::from_blob(blob);
    out.has_nonstd = nonstd;
    Ok(Some(out))
}

/// `jsonFunctionArgToBlob`: a value to insert as JSONB.
fn function_arg_to_blob(a: JsonArg<'_>) -> Result<Vec<u8>, String> {
    match a.value {
        ValueRef::Null => Ok(vec![JSONB_NULL]),
        ValueRef::Blob(b) => match arg_jsonb(b) {
            Some(p) => Ok(p.blob),
            None => Err(BLOB_ERR.to_string()),
        },
        ValueRef::Text(t) => {
            if a.json {
                let mut p = Parse::new(t);
                if !p.convert_text() {
                    return Err(MALFORMED.to_string());
                }
                Ok(p.blob)
            } else {
                let mut p = Parse::new(&[]);
                p.append_node(JSONB_TEXTRAW, t.len(), Some(t));
                Ok(p.blob)
            }
        }
        ValueRef::Real(r) => {
            let z = real_to_text(r);
            let mut p = Parse::new(&[]);
            if z.starts_with('I') {
                p.append_node(JSONB_FLOAT, 5, Some(b"9e999"));
            } else if z.starts_with("-I") {
                p.append_node(JSONB_FLOAT, 6, Some(b"-9e999"));
            } else {
                p.append_node(JSONB_FLOAT, z.len(), Some(z.as_bytes()));
            }
            Ok(p.blob)
        }
        ValueRef::Integer(i) => {
            let z = i.to_string();
            let mut p = Parse::new(&[]);
            p.append_node(JSONB_INT, z.len(), Some(z.as_bytes()));
            Ok(p.blob)
        }
    }
}

/// `jsonBadPathError`.
fn bad_path_error(path: &[u8], rc: Lookup) -> String {
    match rc {
        Lookup::NotArray => format!("not an array element: {}", quote_q(path)),
        Lookup::Error => MALFORMED.to_string(),
        Lookup::TooDeep => "JSON path too deep".to_string(),
        _ => format!("bad JSON path: {}", quote_q(path)),
    }
}

/// `jsonReturnParse`; `edited`: the parse was made editable (SQLite may cache the text).
fn return_parse(p: &mut Parse<'_>, blob: bool, edited: bool) -> Result<JsonResult, String> {
    if blob {
        Ok(JsonResult {
            value: Value::Blob(std::mem::take(&mut p.blob)),
            json: false,
            jsonb: None,
        })
    } else {
        let mut s = JStr::default();
        p.delta = 0;
        p.blob_to_text(0, &mut s);
        Ok(JsonResult {
            value: s.result(false)?,
            json: true,
            jsonb: edited.then(|| p.blob.clone()),
        })
    }
}

/// Nesting below which every recursion of the port runs on the caller's stack.
const INLINE_DEPTH: usize = 48;

/// An upper bound on the nesting the port's recursive descents can reach for `z` read as JSON
/// text: the deepest run of `[`/`{` outside strings, the way the parser delimits them.
fn text_depth_bound(z: &[u8]) -> usize {
    let (mut d, mut max, mut quote, mut esc) = (0usize, 0usize, 0u8, false);
    for &b in z {
        if quote != 0 {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == quote {
                quote = 0;
            }
            continue;
        }
        match b {
            b'"' | b'\'' => quote = b,
            b'[' | b'{' => {
                d += 1;
                max = max.max(d);
            }
            b']' | b'}' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// An upper bound on the nesting of `b` read as JSONB (walked without recursion; a header
/// that does not fit ends the walk there, as it ends every descent of the port).
fn blob_depth_bound(b: &[u8]) -> usize {
    let p = Parse::from_blob(b.to_vec());
    let mut ends: Vec<usize> = Vec::new();
    let mut max = 0;
    let mut i = 0;
    while i < b.len() {
        while ends.last().is_some_and(|&e| i >= e) {
            ends.pop();
        }
        let (n, sz) = p.payload_size(i);
        if n == 0 {
            break;
        }
        if matches!(b[i] & 0x0f, JSONB_ARRAY | JSONB_OBJECT) {
            ends.push(i + n + sz);
            max = max.max(ends.len());
            i += n;
        } else {
            i += n + sz;
        }
    }
    max
}

/// How deep the port may recurse on these arguments (their bounds summed: an edit nests one
/// argument inside another, a path adds a level per step).
fn depth_bound(args: &[JsonArg<'_>]) -> usize {
    args.iter()
        .map(|a| match a.value {
            ValueRef::Text(z) => {
                text_depth_bound(z) + z.iter().filter(|&&c| c == b'.' || c == b'[').count()
            }
            ValueRef::Blob(z) => {
                text_depth_bound(z)
                    + blob_depth_bound(z)
                    + z.iter().filter(|&&c| c == b'.' || c == b'[').count()
            }
            _ => 0,
        })
        .sum()
}

/// Runs `f`, on a thread with a large stack when the input may nest deeply (SQLite's limit
/// of 1000 levels times the port's stack frames can exceed a small caller stack). A panic, which
/// would be a bug of the port, becomes a refusal rather than a guess.
fn guarded<T: Send>(deep: bool, f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    const REFUSED: &str = "corescan: internal error in a JSON function (refused)";
    if !deep {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(REFUSED.to_string()));
    }
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("corescan-json".into())
            .stack_size(256 << 20)
            .spawn_scoped(s, f)
        {
            Ok(h) => h.join().unwrap_or_else(|_| Err(REFUSED.to_string())),
            Err(e) => Err(format!("corescan: cannot evaluate deeply nested JSON: {e}")),
        }
    })
}

/// Calls `f` on `args`: the result and whether SQLite attaches the JSON subtype to it, or
/// SQLite's error message.
pub fn call(f: JsonFunc, args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    call_full(f, args).map(|r| (r.value, r.json))
}

/// Calls `f` on `args`: the result with, for an edit function's text, the JSONB SQLite
/// caches for it; or SQLite's error message.
pub fn call_full(f: JsonFunc, args: &[JsonArg<'_>]) -> Result<JsonResult, String> {
    if let Some(ok) = arities(f) {
        if !ok.contains(&args.len()) {
            return Err(format!(
                "wrong number of arguments to function {}()",
                name_of(f)
            ));
        }
    }
    let deep = depth_bound(args) > INLINE_DEPTH;
    guarded(deep, || {
        let with = |r: Result<(Value, bool, Option<Vec<u8>>), String>| {
            r.map(|(value, json, jsonb)| JsonResult { value, json, jsonb })
        };
        let plain = |r: Result<(Value, bool), String>| {
            r.map(|(value, json)| JsonResult {
                value,
                json,
                jsonb: None,
            })
        };
        use JsonFunc::*;
        let blob = f.returns_jsonb();
        match f {
            Json | Jsonb | Remove | JsonbRemove => with(remove(args, blob)),
            Insert | JsonbInsert => with(set_func(args, JEDIT_INS, "insert", blob)),
            Set | JsonbSet => with(set_func(args, JEDIT_SET, "set", blob)),
            ArrayInsert | JsonbArrayInsert => {
                with(set_func(args, JEDIT_AINS, "array_insert", blob))
            }
            Replace | JsonbReplace => with(set_func(args, JEDIT_REPL, "replace", blob)),
            Patch | JsonbPatch => with(patch(args, blob)),
            _ => plain(call_inner(f, args)),
        }
    })
}

fn call_inner(f: JsonFunc, args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    use JsonFunc::*;
    if let Some(ok) = arities(f) {
        if !ok.contains(&args.len()) {
            return Err(format!(
                "wrong number of arguments to function {}()",
                name_of(f)
            ));
        }
    }
    let blob = f.returns_jsonb();
    match f {
        Json | Jsonb | Remove | JsonbRemove => remove(args, blob).map(|r| (r.0, r.1)),
        Array | JsonbArray => {
            let mut s = JStr::default();
            s.push(b'[');
            for a in args {
                s.separator();
                s.sql_value(*a);
            }
            s.push(b']');
            let v = s.result(blob)?;
            Ok((v, !blob))
        }
        Object | JsonbObject => {
            if args.len() & 1 != 0 {
                return Err("json_object() requires an even number of arguments".to_string());
            }
            let mut s = JStr::default();
            s.push(b'{');
            for pair in args.chunks(2) {
                let ValueRef::Text(label) = pair[0].value else {
                    return Err("json_object() labels must be TEXT".to_string());
                };
                s.separator();
                s.string(label);
                s.push(b':');
                s.sql_value(pair[1]);
            }
            s.push(b'}');
            let v = s.result(blob)?;
            Ok((v, !blob))
        }
        Quote => {
            let mut s = JStr::default();
            s.sql_value(args[0]);
            Ok((s.result(false)?, true))
        }
        ArrayLength => array_length(args),
        Extract | JsonbExtract => extract(args, if blob { 0x10 } else { 0 }),
        Arrow => extract(args, 0x01 | 0x02),
        ArrowText => extract(args, 0x02 | 0x100),
        Type => json_type(args),
        Valid => valid(args),
        Insert | JsonbInsert => set_func(args, JEDIT_INS, "insert", blob).map(|r| (r.0, r.1)),
        Set | JsonbSet => set_func(args, JEDIT_SET, "set", blob).map(|r| (r.0, r.1)),
        ArrayInsert | JsonbArrayInsert => {
            set_func(args, JEDIT_AINS, "array_insert", blob).map(|r| (r.0, r.1))
        }
        Replace | JsonbReplace => set_func(args, JEDIT_REPL, "replace", blob).map(|r| (r.0, r.1)),
        Patch | JsonbPatch => patch(args, blob).map(|r| (r.0, r.1)),
        ErrorPosition => error_position(args),
        Pretty => pretty(args),
        Group => Ok((
            args[0].value.to_owned(),
            matches!(args[0].value, ValueRef::Text(_)),
        )),
    }
}

fn name_of(f: JsonFunc) -> &'static str {
    use JsonFunc::*;
    match f {
        Json => "json",
        Jsonb => "jsonb",
        Arrow => "->",
        ArrowText => "->>",
        Quote => "json_quote",
        ErrorPosition => "json_error_position",
        Patch => "json_patch",
        JsonbPatch => "jsonb_patch",
        Type => "json_type",
        Valid => "json_valid",
        ArrayLength => "json_array_length",
        Pretty => "json_pretty",
        Group => "json_group_array",
        _ => "json",
    }
}

/// `jsonRemoveFunc` (also `json()` and `jsonb()`, its one-argument form).
fn remove(args: &[JsonArg<'_>], blob: bool) -> Result<(Value, bool, Option<Vec<u8>>), String> {
    let Some(first) = args.first() else {
        return Ok((Value::Null, false, None));
    };
    let Some(mut p) = parse_func_arg(*first)? else {
        return Ok((Value::Null, false, None));
    };
    for a in &args[1..] {
        let Some(path) = value_cstr(a.value) else {
            return Ok((Value::Null, false, None));
        };
        if at(&path, 0) != b'$' {
            return Err(bad_path_error(&path, Lookup::PathError));
        }
        if path.len() == 1 {
            return Ok((Value::Null, false, None));
        }
        p.e_edit = JEDIT_DEL;
        p.delta = 0;
        let rc = p.lookup_step(0, &path[1..], 0, 0);
        match rc {
            Lookup::Found(_) | Lookup::NotFound => {}
            _ => return Err(bad_path_error(&path, rc)),
        }
    }
    let edited = args.len() > 1;
    return_parse(&mut p, blob, edited).map(|r| (r.value, r.json, r.jsonb))
}

/// `jsonArrayLengthFunc`.
fn array_length(args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    let Some(mut p) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false));
    };
    let mut i = 0;
    if args.len() == 2 {
        let Some(path) = value_cstr(args[1].value) else {
            return Ok((Value::Null, false));
        };
        let rc = if at(&path, 0) == b'$' {
            p.lookup_step(0, &path[1..], 0, 0)
        } else {
            p.lookup_step(0, b"@", 0, 0)
        };
        match rc {
            Lookup::Found(x) => i = x,
            Lookup::NotFound => return Ok((Value::Null, false)),
            _ => return Err(bad_path_error(&path, rc)),
        }
    }
    let cnt = if p.blob.get(i).copied().unwrap_or(0) & 0x0f == JSONB_ARRAY {
        p.array_count(i)
    } else {
        0
    };
    Ok((Value::Integer(cnt), false))
}

/// `jsonExtractFunc`; `flags`: 0x01 JSON, 0x02 abbreviated paths, 0x10 JSONB, 0x100 SQL.
fn extract(args: &[JsonArg<'_>], flags: u32) -> Result<(Value, bool), String> {
    const JSON: u32 = 0x01;
    const ABPATH: u32 = 0x02;
    const BLOB: u32 = 0x10;
    const SQL: u32 = 0x100;
    if args.len() < 2 {
        return Ok((Value::Null, false));
    }
    let Some(mut p) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false));
    };
    let multi = args.len() > 2;
    let mut jx = JStr::default();
    if multi {
        jx.push(b'[');
    }
    for a in &args[1..] {
        let Some(path) = value_cstr(a.value) else {
            return Ok((Value::Null, false));
        };
        let j = if at(&path, 0) == b'$' {
            p.lookup_step(0, &path[1..], 0, 0)
        } else if flags & ABPATH != 0 {
            let mut q: Vec<u8> = Vec::new();
            if matches!(a.value, ValueRef::Integer(_)) {
                q.push(b'[');
                if at(&path, 0) == b'-' {
                    q.push(b'#');
                }
                q.extend_from_slice(&path);
                q.push(b']');
            } else if path.iter().all(|&c| is_alnum(c) || c == b'_') {
                q.push(b'.');
                q.extend_from_slice(&path);
            } else if at(&path, 0) == b'[' && path.len() >= 3 && path[path.len() - 1] == b']' {
                q.extend_from_slice(&path);
            } else {
                q.extend_from_slice(b".\"");
                q.extend_from_slice(&path);
                q.push(b'"');
            }
            p.lookup_step(0, &q, 0, 0)
        } else {
            return Err(bad_path_error(&path, Lookup::PathError));
        };
        match j {
            Lookup::Found(j) if j < p.blob.len() => {
                if !multi {
                    if flags & JSON != 0 {
                        let mut s = JStr::default();
                        p.blob_to_text(j, &mut s);
                        return Ok((s.result(false)?, true));
                    }
                    let mode = if flags & BLOB != 0 { 2 } else { 1 };
                    let v = p.return_from_blob(j, mode)?;
                    let sub = flags & (SQL | BLOB) == 0 && (p.blob[j] & 0x0f) >= JSONB_ARRAY;
                    return Ok((v, sub));
                }
                jx.separator();
                p.blob_to_text(j, &mut jx);
            }
            Lookup::Found(_) => return Err(bad_path_error(&path, Lookup::PathError)),
            Lookup::NotFound => {
                if !multi {
                    return Ok((Value::Null, false));
                }
                jx.separator();
                jx.raw(b"null");
            }
            rc => return Err(bad_path_error(&path, rc)),
        }
    }
    jx.push(b']');
    let blob = flags & BLOB != 0;
    let v = jx.result(blob)?;
    Ok((v, !blob))
}

/// `jsonTypeFunc`.
fn json_type(args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    let Some(mut p) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false));
    };
    let mut i = 0;
    if args.len() == 2 {
        let Some(path) = value_cstr(args[1].value) else {
            return Ok((Value::Null, false));
        };
        if at(&path, 0) != b'$' {
            return Err(bad_path_error(&path, Lookup::PathError));
        }
        match p.lookup_step(0, &path[1..], 0, 0) {
            Lookup::Found(x) => i = x,
            Lookup::NotFound => return Ok((Value::Null, false)),
            rc => return Err(bad_path_error(&path, rc)),
        }
    }
    let t = p.blob.get(i).copied().unwrap_or(0) & 0x0f;
    Ok((Value::text(JSON_TYPE_NAMES[t as usize]), false))
}

/// `jsonValidFunc`.
fn valid(args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    let mut flags: i64 = 1;
    if args.len() == 2 {
        let f = args[1].value.to_i64().unwrap_or(0);
        if !(1..=15).contains(&f) {
            return Err("FLAGS parameter to json_valid() must be between 1 and 15".to_string());
        }
        flags = f & 0x0f;
    }
    let v = args[0].value;
    if v.is_null() {
        return Ok((Value::Null, false));
    }
    if let ValueRef::Blob(b) = v {
        if let Some(p) = arg_jsonb(b) {
            let res = if flags & 0x04 != 0 {
                true
            } else if flags & 0x08 != 0 {
                validity_check(&p, 0, p.blob.len(), 1) == 0
            } else {
                false
            };
            return Ok((Value::Integer(res.into()), false));
        }
    }
    if flags & 0x3 == 0 {
        return Ok((Value::Integer(0), false));
    }
    let text = value_text(v).unwrap_or_default();
    let res = if text.is_empty() {
        false
    } else {
        let mut p = Parse::new(&text);
        p.convert_text() && (flags & 0x02 != 0 || !p.has_nonstd)
    };
    Ok((Value::Integer(res.into()), false))
}

/// `jsonSetFunc`, `jsonReplaceFunc` and `jsonInsertIntoBlob`.
fn set_func(
    args: &[JsonArg<'_>],
    e_edit: u8,
    name: &str,
    blob: bool,
) -> Result<(Value, bool, Option<Vec<u8>>), String> {
    if args.is_empty() {
        return Ok((Value::Null, false, None));
    }
    if args.len() & 1 == 0 {
        return Err(format!("json_{name}() needs an odd number of arguments"));
    }
    let Some(mut p) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false, None));
    };
    let mut rc = Lookup::Found(0);
    let mut i = 1;
    while i + 1 < args.len() {
        let Some(path) = value_cstr(args[i].value) else {
            i += 2;
            continue;
        };
        if at(&path, 0) != b'$' {
            return Err(bad_path_error(&path, rc));
        }
        let ax = function_arg_to_blob(args[i + 1])?;
        if path.len() == 1 {
            if e_edit == JEDIT_REPL || e_edit == JEDIT_SET {
                let n = p.blob.len();
                p.blob_edit(0, n, Some(&ax), ax.len());
            }
            rc = Lookup::Found(0);
        } else {
            p.e_edit = e_edit;
            p.ins = ax;
            p.delta = 0;
            p.depth = 0;
            rc = p.lookup_step(0, &path[1..], 0, 0);
        }
        i += 2;
        match rc {
            Lookup::Found(_) | Lookup::NotFound => {}
            _ => return Err(bad_path_error(&path, rc)),
        }
    }
    p.e_edit = 0;
    let edited = args.len() > 1;
    return_parse(&mut p, blob, edited).map(|r| (r.value, r.json, r.jsonb))
}

/// `jsonMergePatch` result codes.
#[derive(Debug, PartialEq, Eq)]
enum Merge {
    Ok,
    BadTarget,
    BadPatch,
    TooDeep,
}

/// `jsonMergePatch` (RFC 7396) on `t` at `it` with `pt` at `ip`.
fn merge_patch(t: &mut Parse<'_>, it: usize, pt: &Parse<'_>, ip: usize, depth: u32) -> Merge {
    let x = pt.blob[ip] & 0x0f;
    if x != JSONB_OBJECT {
        let (n, sz) = pt.payload_size(ip);
        let sz_patch = n + sz;
        let (n, sz) = t.payload_size(it);
        let sz_target = n + sz;
        let ins = pt.blob[ip..(ip + sz_patch).min(pt.blob.len())].to_vec();
        let n_ins = ins.len();
        t.blob_edit(it, sz_target, Some(&ins), n_ins);
        return Merge::Ok;
    }
    let x = t.blob[it] & 0x0f;
    if x != JSONB_OBJECT {
        let (n, sz) = t.payload_size(it);
        t.blob_edit(it + n, sz, None, 0);
        let x = t.blob[it];
        t.blob[it] = (x & 0xf0) | JSONB_OBJECT;
    }
    let (n, sz) = pt.payload_size(ip);
    if n == 0 {
        return Merge::BadPatch;
    }
    let mut ipc = ip + n;
    let ipe = ipc + sz;
    let (n, sz) = t.payload_size(it);
    if n == 0 {
        return Merge::BadTarget;
    }
    let its = it + n;
    let ite_be = its + sz;
    while ipc < ipe {
        let ipl = ipc;
        let epl = pt.blob[ipc] & 0x0f;
        if !(JSONB_TEXT..=JSONB_TEXTRAW).contains(&epl) {
            return Merge::BadPatch;
        }
        let (npl, szpl) = pt.payload_size(ipc);
        if npl == 0 {
            return Merge::BadPatch;
        }
        let ipv = ipc + npl + szpl;
        if ipv >= ipe {
            return Merge::BadPatch;
        }
        let (npv, szpv) = pt.payload_size(ipv);
        if npv == 0 {
            return Merge::BadPatch;
        }
        ipc = ipv + npv + szpv;
        if ipc > ipe {
            return Merge::BadPatch;
        }
        let mut itc = its;
        let ite = (ite_be as i64 + t.delta) as usize;
        let (mut itl, mut ntl, mut sztl, mut itv, mut ntv, mut sztv) = (0, 0, 0, 0, 0, 0);
        while itc < ite {
            itl = itc;
            let etl = t.blob[itc] & 0x0f;
            if !(JSONB_TEXT..=JSONB_TEXTRAW).contains(&etl) {
                return Merge::BadTarget;
            }
            let (a, b) = t.payload_size(itc);
            ntl = a;
            sztl = b;
            if ntl == 0 {
                return Merge::BadTarget;
            }
            itv = itl + ntl + sztl;
            if itv >= ite {
                return Merge::BadTarget;
            }
            let (a, b) = t.payload_size(itv);
            ntv = a;
            sztv = b;
            if ntv == 0 {
                return Merge::BadTarget;
            }
            if itv + ntv + sztv > ite {
                return Merge::BadTarget;
            }
            let eq = label_compare(
                &pt.blob[ipl + npl..ipl + npl + szpl],
                epl == JSONB_TEXT || epl == JSONB_TEXTRAW,
                &t.blob[itl + ntl..itl + ntl + sztl],
                etl == JSONB_TEXT || etl == JSONB_TEXTRAW,
            );
            if eq {
                break;
            }
            itc = itv + ntv + sztv;
        }
        let x = pt.blob[ipv] & 0x0f;
        if itc < ite {
            if x == 0 {
                t.blob_edit(itl, ntl + sztl + ntv + sztv, None, 0);
            } else {
                let saved = t.delta;
                t.delta = 0;
                if depth >= JSON_MAX_DEPTH {
                    return Merge::TooDeep;
                }
                let rc = merge_patch(t, itv, pt, ipv, depth + 1);
                if rc != Merge::Ok {
                    return rc;
                }
                t.delta += saved;
            }
        } else if x > 0 {
            let sz_new = szpl + npl;
            if (pt.blob[ipv] & 0x0f) != JSONB_OBJECT {
                let mut ins = pt.blob[ipl..ipl + sz_new].to_vec();
                ins.extend_from_slice(&pt.blob[ipv..ipv + szpv + npv]);
                let n_ins = ins.len();
                t.blob_edit(ite, 0, Some(&ins), n_ins);
            } else {
                let mut ins = pt.blob[ipl..ipl + sz_new].to_vec();
                ins.push(0x00);
                let n_ins = ins.len();
                t.blob_edit(ite, 0, Some(&ins), n_ins);
                let saved = t.delta;
                t.delta = 0;
                if depth >= JSON_MAX_DEPTH {
                    return Merge::TooDeep;
                }
                let rc = merge_patch(t, ite + sz_new, pt, ipv, depth + 1);
                if rc != Merge::Ok {
                    return rc;
                }
                t.delta += saved;
            }
        }
    }
    if t.delta != 0 {
        t.after_edit_size_adjust(it);
    }
    Merge::Ok
}

/// `jsonPatchFunc`.
fn patch(args: &[JsonArg<'_>], blob: bool) -> Result<(Value, bool, Option<Vec<u8>>), String> {
    let Some(mut t) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false, None));
    };
    let Some(pt) = parse_func_arg(args[1])? else {
        return Ok((Value::Null, false, None));
    };
    match merge_patch(&mut t, 0, &pt, 0, 0) {
        Merge::Ok => {
            t.delta = 0;
            return_parse(&mut t, blob, true).map(|r| (r.value, r.json, r.jsonb))
        }
        Merge::TooDeep => Err(TOO_DEEP.to_string()),
        _ => Err(MALFORMED.to_string()),
    }
}

/// `jsonErrorFunc`.
fn error_position(args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    let v = args[0].value;
    if let ValueRef::Blob(b) = v {
        if let Some(p) = arg_jsonb(b) {
            let pos = validity_check(&p, 0, p.blob.len(), 1);
            return Ok((Value::Integer(pos as i64), false));
        }
    }
    let Some(text) = value_text(v) else {
        return Ok((Value::Null, false));
    };
    let mut p = Parse::new(&text);
    let mut pos: i64 = 0;
    if !p.convert_text() {
        let mut k = 0;
        while k < p.i_err && at(&text, k) != 0 {
            if (text[k] & 0xc0) != 0x80 {
                pos += 1;
            }
            k += 1;
        }
        pos += 1;
    }
    Ok((Value::Integer(pos), false))
}

/// `jsonPrettyFunc`.
fn pretty(args: &[JsonArg<'_>]) -> Result<(Value, bool), String> {
    let Some(mut p) = parse_func_arg(args[0])? else {
        return Ok((Value::Null, false));
    };
    let indent = match args.get(1).and_then(|a| value_cstr(a.value)) {
        Some(z) => z,
        None => b"    ".to_vec(),
    };
    let mut s = JStr::default();
    let mut n_indent = 0;
    p.blob_to_pretty(0, &mut s, &indent, &mut n_indent);
    Ok((s.result(false)?, false))
}

// ---------------------------------------------------------------------------------------------
// Aggregates.

/// Which JSON aggregate a [`JsonGroup`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum JsonGroupKind {
    /// `json_group_array(V)`.
    Array,
    /// `jsonb_group_array(V)`.
    JsonbArray,
    /// `json_group_object(K, V)`.
    Object,
    /// `jsonb_group_object(K, V)`.
    JsonbObject,
}

impl JsonGroupKind {
    /// The aggregate for a lower-case SQL name and argument count: `None` if the name is no
    /// JSON aggregate, `Some(Err)` with SQLite's message when the count is wrong.
    pub fn from_name(name: &str, args: usize) -> Option<Result<JsonGroupKind, String>> {
        let (k, n) = match name {
            "json_group_array" => (JsonGroupKind::Array, 1),
            "jsonb_group_array" => (JsonGroupKind::JsonbArray, 1),
            "json_group_object" => (JsonGroupKind::Object, 2),
            "jsonb_group_object" => (JsonGroupKind::JsonbObject, 2),
            _ => return None,
        };
        Some(if args == n {
            Ok(k)
        } else {
            Err(format!("wrong number of arguments to function {name}()"))
        })
    }

    /// Whether it is `json_group_object` or `jsonb_group_object` (two arguments).
    pub fn object(self) -> bool {
        matches!(self, JsonGroupKind::Object | JsonGroupKind::JsonbObject)
    }

    /// Whether it returns JSONB (the `jsonb_` forms; the others return text with the JSON
    /// subtype).
    pub fn blob(self) -> bool {
        matches!(self, JsonGroupKind::JsonbArray | JsonGroupKind::JsonbObject)
    }
}

/// How one row of a JSON aggregate rendered alone ended ([`JsonGroup::render_row`]): its
/// error flags and message, in two bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JsonMark {
    err: u8,
    /// 0: none, else 1 + the message's place in [`MARK_MESSAGES`].
    msg: u8,
}

/// The messages a [`JsonMark`] can carry.
const MARK_MESSAGES: [&str; 3] = [BLOB_ERR, TOO_DEEP, MALFORMED];

impl JsonMark {
    fn of(s: &JStr) -> JsonMark {
        let msg = s
            .msg
            .and_then(|m| MARK_MESSAGES.iter().position(|k| *k == m))
            .map_or(0, |i| i as u8 + 1);
        JsonMark { err: s.err, msg }
    }

    fn msg(self) -> Option<&'static str> {
        (self.msg > 0).then(|| MARK_MESSAGES[usize::from(self.msg - 1) % MARK_MESSAGES.len()])
    }
}

/// `json_group_array`/`json_group_object` (and their `jsonb_` forms) as an aggregate state:
/// the text SQLite accumulates, byte for byte.
///
/// An `update` that fails is the query's error (SQLite aborts the statement there). A JSONB
/// blob that only looks valid and is malformed inside is not an error until `finish`, as in
/// SQLite; after one, later rows raise no error (their values are not rendered). `merge`
/// appends a later range's state, so partial states merged in scan order give SQLite's
/// answer; it cannot un-raise an error a later range's `update` already returned after an
/// earlier range met such a malformed blob (SQLite would not have raised it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsonGroup {
    kind: JsonGroupKind,
    s: Option<JStr>,
}

impl JsonGroup {
    /// An empty state.
    pub fn new(kind: JsonGroupKind) -> JsonGroup {
        JsonGroup { kind, s: None }
    }

    /// The state of one row's arguments alone, an error SQLite raises at that row kept in it
    /// (raised by [`Self::finish`] once the rows before it are merged in: after an earlier
    /// malformed JSONB blob SQLite raises none). `Err` only for a failure no state records.
    pub fn row(kind: JsonGroupKind, args: &[JsonArg<'_>]) -> Result<JsonGroup, String> {
        let mut g = JsonGroup::new(kind);
        match g.update(args) {
            Ok(()) => Ok(g),
            Err(_) if g.s.as_ref().is_some_and(|s| s.err != 0) => Ok(g),
            Err(e) => Err(e),
        }
    }

    /// Adds one row's arguments (one for the arrays, label and value for the objects).
    pub fn update(&mut self, args: &[JsonArg<'_>]) -> Result<(), String> {
        let deep = depth_bound(args) > INLINE_DEPTH;
        guarded(deep, || self.update_inner(args))
    }

    fn update_inner(&mut self, args: &[JsonArg<'_>]) -> Result<(), String> {
        let need = if self.kind.object() { 2 } else { 1 };
        if args.len() != need {
            return Err("wrong number of arguments to JSON aggregate".to_string());
        }
        let object = self.kind.object();
        let fresh = self.s.is_none();
        let s = self.s.get_or_insert_with(JStr::default);
        let before = s.err;
        if fresh {
            s.push(if object { b'{' } else { b'[' });
        } else if s.buf.len() > 1 {
            s.push(b',');
        }
        if object {
            match value_cstr(args[0].value) {
                Some(label) => {
                    s.string(&label);
                    s.push(b':');
                    s.sql_value(args[1]);
                }
                None => {
                    if let Some(b) = s.buf.first_mut() {
                        *b = b'@';
                    }
                    s.push(b'@');
                }
            }
        } else {
            s.sql_value(args[0]);
        }
        let new = s.err & !before;
        if new & (JSTRING_ERR | JSTRING_TOODEEP) != 0 {
            return Err(s.msg.unwrap_or(MALFORMED).to_string());
        }
        Ok(())
    }

    /// Appends the state of a later range of rows.
    pub fn merge(&mut self, later: JsonGroup) {
        let Some(l) = later.s else {
            return;
        };
        if self.s.is_none() {
            self.s = Some(l);
            return;
        }
        self.merge_row(&l.buf, JsonMark::of(&l));
    }

    /// Renders one row's arguments alone ([`Self::row`]), appending its bytes to `out`: how
    /// it ended, to merge it with later ([`Self::merge_row`]). A JSON aggregate keeps its rows
    /// this way, a few bytes each, until it knows their order.
    pub fn render_row(
        kind: JsonGroupKind,
        args: &[JsonArg<'_>],
        out: &mut Vec<u8>,
    ) -> Result<JsonMark, String> {
        let s = JsonGroup::row(kind, args)?.s.unwrap_or_default();
        out.extend_from_slice(&s.buf);
        Ok(JsonMark::of(&s))
    }

    /// Appends a later row rendered by [`Self::render_row`] (its bytes and mark).
    pub fn merge_row(&mut self, bytes: &[u8], mark: JsonMark) {
        let Some(s) = self.s.as_mut() else {
            self.s = Some(JStr {
                buf: bytes.to_vec(),
                err: mark.err,
                msg: mark.msg(),
            });
            return;
        };
        if s.err != 0 {
            // SQLite renders and raises nothing after the first error.
            return;
        }
        if mark.err != 0 {
            s.msg = mark.msg();
            s.err = mark.err;
            return;
        }
        if bytes.len() > 1 {
            if s.buf.len() > 1 {
                s.push(b',');
            }
            s.raw(&bytes[1..]);
        }
        if bytes.first() == Some(&b'@') {
            s.buf[0] = b'@';
        }
    }

    /// The aggregate's value and whether it carries the JSON subtype.
    pub fn finish(self) -> Result<(Value, bool), String> {
        let deep = self.kind.blob()
            && self
                .s
                .as_ref()
                .is_some_and(|s| text_depth_bound(&s.buf) + 1 > INLINE_DEPTH);
        guarded(deep, || self.finish_inner())
    }

    fn finish_inner(self) -> Result<(Value, bool), String> {
        let blob = self.kind.blob();
        let Some(mut s) = self.s else {
            return Ok(match (self.kind.object(), blob) {
                (false, false) => (Value::text("[]"), true),
                (false, true) => (Value::Blob(vec![0x0b]), false),
                (true, false) => (Value::text("{}"), true),
                (true, true) => (Value::Blob(vec![0x0c]), false),
            });
        };
        s.push(if self.kind.object() { b'}' } else { b']' });
        if s.err != 0 {
            return s.result(false).map(|v| (v, false));
        }
        if self.kind.object() && s.buf[0] != b'{' {
            let z = std::mem::take(&mut s.buf);
            let mut out = Vec::with_capacity(z.len());
            out.push(b'{');
            let mut in_str = false;
            let mut i = 1;
            while i < z.len() {
                let c = z[i];
                if c == b'"' {
                    in_str = !in_str;
                    out.push(b'"');
                } else if c == b'\\' {
                    out.push(b'\\');
                    i += 1;
                    out.push(at(&z, i));
                } else if c == b'@' && !in_str {
                    if at(&z, i + 1) == b',' {
                        i += 1;
                    } else if out.last() == Some(&b',') {
                        out.pop();
                    }
                } else {
                    out.push(c);
                }
                i += 1;
            }
            s.buf = out;
        }
        let v = s.result(blob)?;
        Ok((v, !blob))
    }
}
