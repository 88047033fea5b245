//! SQLite's `printf(FORMAT, ...)` SQL function (also spelled `format()`), byte for byte as
//! SQLite 3.54 computes it: a port of `sqlite3_str_vappendf` (printf.c) as the SQL function
//! drives it (`SQLITE_PRINTF_SQLFUNC`: every argument comes from the SQL argument list through
//! `getIntArg`, `getDoubleArg` and `getTextArg`), and of `sqlite3FpDecode`, SQLite's own
//! floating-point digit generation (at most 16 significant digits, 20 with the `!` flag, and
//! its own rounding: `%.20f` of 0.1 is `0.10000000000000000000`, not the C library's answer).
//!
//! What the SQL function does that a C `printf` does not:
//!
//! - arguments convert as `sqlite3_value_int64`, `sqlite3_value_double` and
//!   `sqlite3_value_text` convert them (`'12abc'` is 12 for `%d`, a real is `%!.17g` text for
//!   `%s`), and a missing argument is 0, 0.0 or a NULL string;
//! - a negative `*` precision is taken as its absolute value;
//! - `%n` writes nothing and takes no argument, `%p` is `%X` of an integer with a `0x` prefix
//!   under `#`, `%T`, `%S` and an unknown conversion character end the output there;
//! - `%c` takes the first character of its argument's text (a NUL when there is none) and
//!   repeats it `precision` times;
//! - `%q`, `%Q`, `%w` quote, `%j`, `%J` escape as JSON, `%r` is an ordinal (`1st`);
//! - text is bytes: the format and every text argument end at their first NUL byte, as the C
//!   strings SQLite hands its formatter do;
//! - the result may not reach `SQLITE_MAX_LENGTH` (10^9 bytes): SQLite then fails with
//!   "string or blob too big", and so does [`printf`], before allocating anything that large.

use std::borrow::Cow;

use partitioner::numeric_text::{atof, atoi64, real_to_i64};

use crate::value::{Value, ValueRef};

/// `SQLITE_MAX_LENGTH` (the bundled library's default limit on a string's length).
const MAX_LENGTH: i64 = 1_000_000_000;
/// `etBUFSIZE`: the formatter's stack buffer; larger integer renderings ask for a heap buffer
/// first, and fail when that request alone exceeds [`MAX_LENGTH`].
const BUF_SIZE: i64 = 70;
/// `SQLITE_FP_PRECISION_LIMIT`: floating-point precisions are capped here.
const FP_PRECISION_LIMIT: i64 = 100_000_000;
/// SQLite's message for `SQLITE_TOOBIG`.
const TOO_BIG: &str = "string or blob too big";

/// SQLite's printf(FORMAT, ...) / format(FORMAT, ...): the SQL function's result.
///
/// `args[0]` is the format and the rest are its arguments. The result is NULL when there is
/// no argument at all or the format is NULL, and text otherwise (`''` when nothing was
/// written). The text is the bytes SQLite produces, which need not be UTF-8 (arguments'
/// bytes are copied as they are, and `%c` of an empty string writes a NUL byte). The error is
/// SQLite's message: "string or blob too big" when the result would reach 10^9 bytes (or a
/// width or precision asks for a buffer that large), "out of memory" when an allocation fails.
pub fn printf(args: &[ValueRef<'_>]) -> Result<Value, String> {
    printf_limited(args, MAX_LENGTH)
}

/// [`printf`] under a length limit of `limit` bytes (`SQLITE_LIMIT_LENGTH`; the tests lower
/// it, as they lower SQLite's, to check the limit's edges cheaply).
fn printf_limited(args: &[ValueRef<'_>], limit: i64) -> Result<Value, String> {
    let Some(&format) = args.first() else {
        return Ok(Value::Null);
    };
    let Some(fmt) = text_arg(format) else {
        return Ok(Value::Null);
    };
    let mut list = Args {
        args: &args[1..],
        used: 0,
    };
    let mut acc = Acc {
        out: Vec::new(),
        limit,
    };
    match format_into(&mut acc, &fmt, &mut list) {
        Ok(()) => Ok(Value::Text(acc.out)),
        Err(Stop::TooBig) => Err(TOO_BIG.to_string()),
        Err(Stop::NoMem) => Err("out of memory".to_string()),
    }
}

/// Why the formatting stopped with an error (`StrAccum.accError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// `SQLITE_TOOBIG`.
    TooBig,
    /// `SQLITE_NOMEM`.
    NoMem,
}

/// The output (`StrAccum` with `mxAlloc` = [`MAX_LENGTH`]). An append that would make it
/// [`MAX_LENGTH`] bytes or longer fails (`sqlite3StrAccumEnlarge`: the new size with its NUL
/// may not exceed the limit), and an error is final, so the first one ends the formatting.
struct Acc {
    out: Vec<u8>,
    /// `mxAlloc`: [`MAX_LENGTH`] for the SQL function.
    limit: i64,
}

impl Acc {
    /// Fails unless `n` more bytes fit, and reserves room for them.
    fn room(&mut self, n: i64) -> Result<(), Stop> {
        if n <= 0 {
            return Ok(());
        }
        if self.out.len() as i64 + n >= self.limit {
            return Err(Stop::TooBig);
        }
        self.out.try_reserve(n as usize).map_err(|_| Stop::NoMem)
    }

    /// `sqlite3StrAppend64`.
    fn append(&mut self, z: &[u8]) -> Result<(), Stop> {
        self.room(z.len() as i64)?;
        self.out.extend_from_slice(z);
        Ok(())
    }

    /// `sqlite3StrAppendchar64`: `n` copies of `c` (nothing when `n` is not positive).
    fn append_char(&mut self, n: i64, c: u8) -> Result<(), Stop> {
        if n <= 0 {
            return Ok(());
        }
        self.room(n)?;
        self.out.resize(self.out.len() + n as usize, c);
        Ok(())
    }
}

/// `PrintfArguments`: the SQL arguments after the format, taken in order.
struct Args<'a, 'v> {
    args: &'a [ValueRef<'v>],
    used: usize,
}

impl<'v> Args<'_, 'v> {
    /// The next argument, `None` when they are used up.
    fn next(&mut self) -> Option<ValueRef<'v>> {
        let v = self.args.get(self.used).copied()?;
        self.used += 1;
        Some(v)
    }

    /// `getIntArg`: `sqlite3_value_int64` of the next argument, 0 when there is none.
    fn int(&mut self) -> i64 {
        self.next().map_or(0, int_arg)
    }

    /// `getDoubleArg`: `sqlite3_value_double` of the next argument, 0.0 when there is none.
    fn double(&mut self) -> f64 {
        self.next().map_or(0.0, double_arg)
    }

    /// `getTextArg`: `sqlite3_value_text` of the next argument, `None` (a NULL pointer) when
    /// there is none or it is NULL.
    fn text(&mut self) -> Option<Cow<'v, [u8]>> {
        self.next().and_then(text_arg)
    }
}

/// `sqlite3_value_int64`: NULL is 0, a real truncates toward zero (saturating), text and
/// blobs read their integer prefix (`sqlite3Atoi64`: `'12abc'` is 12, `'1e3'` is 1).
fn int_arg(v: ValueRef<'_>) -> i64 {
    match v {
        ValueRef::Null => 0,
        ValueRef::Integer(i) => i,
        ValueRef::Real(r) if r.is_nan() => 0,
        ValueRef::Real(r) => real_to_i64(r),
        ValueRef::Text(z) | ValueRef::Blob(z) => atoi64(z).1,
    }
}

/// `sqlite3_value_double`: NULL is 0.0, text and blobs read their numeric prefix as
/// `sqlite3AtoF` does (up to a NUL byte).
fn double_arg(v: ValueRef<'_>) -> f64 {
    match v {
        ValueRef::Null => 0.0,
        ValueRef::Integer(i) => i as f64,
        ValueRef::Real(r) if r.is_nan() => 0.0,
        ValueRef::Real(r) => r,
        ValueRef::Text(z) | ValueRef::Blob(z) => atof(z).1,
    }
}

/// `sqlite3_value_text` as a C string: `None` for NULL (a NaN real counts as NULL, as SQLite
/// stores it), an integer in decimal, a real as `%!.17g` (`vdbeMemRenderNum`), text and blobs
/// as their bytes up to the first NUL.
fn text_arg<'v>(v: ValueRef<'v>) -> Option<Cow<'v, [u8]>> {
    match v {
        ValueRef::Null => None,
        ValueRef::Real(r) if r.is_nan() => None,
        ValueRef::Integer(i) => Some(Cow::Owned(i.to_string().into_bytes())),
        ValueRef::Real(r) => Some(Cow::Owned(real_text(r))),
        ValueRef::Text(z) | ValueRef::Blob(z) => Some(Cow::Borrowed(until_nul(z))),
    }
}

/// The bytes before the first NUL.
fn until_nul(z: &[u8]) -> &[u8] {
    match z.iter().position(|&b| b == 0) {
        Some(end) => &z[..end],
        None => z,
    }
}

/// A real as SQLite's text conversion renders it: `%!.17g` through this formatter.
fn real_text(r: f64) -> Vec<u8> {
    let flags = Flags {
        altform2: true,
        ..Flags::default()
    };
    render_float(r, Kind::Generic, 17, 0, flags, b'e', MAX_LENGTH).unwrap_or_default()
}

/// A conversion's paradigm (`etRADIX` and the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Radix,
    Float,
    Exp,
    Generic,
    Size,
    String,
    DynString,
    Percent,
    Char,
    EscapeQLower,
    EscapeQUpper,
    Token,
    SrcItem,
    Pointer,
    EscapeW,
    Ordinal,
    Decimal,
    EscapeJLower,
    EscapeJUpper,
}

/// `et_info`: one conversion character.
struct Info {
    fmttype: u8,
    base: u8,
    signed: bool,
    kind: Kind,
    /// Offset into [`DIGITS`].
    charset: usize,
    /// Offset into [`PREFIX`].
    prefix: usize,
    /// The next entry with the same hash.
    next: usize,
}

const DIGITS: &[u8; 32] = b"0123456789ABCDEF0123456789abcdef";
const HEX: &[u8; 16] = b"0123456789abcdef";
const PREFIX: &[u8; 6] = b"-x0\0X0";

const fn info(
    fmttype: u8,
    base: u8,
    flags: u8,
    kind: Kind,
    charset: usize,
    prefix: usize,
    next: usize,
) -> Info {
    Info {
        fmttype,
        base,
        signed: flags & 1 != 0,
        kind,
        charset,
        prefix,
        next,
    }
}

/// `fmtinfo[]`, hashed by the character modulo 25.
const FMTINFO: [Info; 25] = [
    info(b'd', 10, 1, Kind::Decimal, 0, 0, 0),
    info(b'e', 0, 1, Kind::Exp, 30, 0, 0),
    info(b'f', 0, 1, Kind::Float, 0, 0, 0),
    info(b'g', 0, 1, Kind::Generic, 30, 0, 0),
    info(b'j', 0, 0, Kind::EscapeJLower, 0, 0, 0),
    info(b'i', 10, 1, Kind::Decimal, 0, 0, 0),
    info(b'Q', 0, 4, Kind::EscapeQUpper, 0, 0, 4),
    info(b'p', 16, 0, Kind::Pointer, 0, 1, 0),
    info(b'S', 0, 0, Kind::SrcItem, 0, 0, 0),
    info(b'T', 0, 0, Kind::Token, 0, 0, 0),
    info(b'n', 0, 0, Kind::Size, 0, 0, 0),
    info(b'o', 8, 0, Kind::Radix, 0, 2, 0),
    info(b'%', 0, 0, Kind::Percent, 0, 0, 7),
    info(b'q', 0, 4, Kind::EscapeQLower, 0, 0, 16),
    info(b'r', 10, 1, Kind::Ordinal, 0, 0, 0),
    info(b's', 0, 4, Kind::String, 0, 0, 0),
    info(b'X', 16, 0, Kind::Radix, 0, 4, 0),
    info(b'u', 10, 0, Kind::Decimal, 0, 0, 0),
    info(b'w', 0, 4, Kind::EscapeW, 0, 0, 0),
    info(b'E', 0, 1, Kind::Exp, 14, 0, 18),
    info(b'x', 16, 0, Kind::Radix, 16, 1, 0),
    info(b'G', 0, 1, Kind::Generic, 14, 0, 0),
    info(b'z', 0, 4, Kind::DynString, 0, 0, 0),
    info(b'J', 0, 0, Kind::EscapeJUpper, 0, 0, 0),
    info(b'c', 0, 0, Kind::Char, 0, 0, 23),
];

/// The conversion character `c`'s entry, `None` for an invalid one (any byte from 0x80 is a
/// negative `char` to SQLite and matches nothing).
fn lookup(c: u8) -> Option<&'static Info> {
    if c >= 0x80 {
        return None;
    }
    let idx = usize::from(c) % 25;
    let first = &FMTINFO[idx];
    if first.fmttype == c {
        return Some(first);
    }
    let second = FMTINFO.get(first.next)?;
    (second.fmttype == c).then_some(second)
}

/// The flags of one conversion.
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    /// `-`
    left: bool,
    /// `+` or space, or 0.
    prefix: u8,
    /// `#`
    alt: bool,
    /// `!`
    altform2: bool,
    /// `0`
    zeropad: bool,
    /// `,` (a `,` byte), or 0.
    thousand: u8,
}

/// `sqlite3_str_vappendf` with `SQLITE_PRINTF_SQLFUNC`.
fn format_into(acc: &mut Acc, fmt: &[u8], args: &mut Args<'_, '_>) -> Result<(), Stop> {
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut i = 0usize;
    loop {
        let mut c = at(i);
        if c == 0 {
            return Ok(());
        }
        if c != b'%' {
            let start = i;
            while at(i) != 0 && at(i) != b'%' {
                i += 1;
            }
            acc.append(&fmt[start..i])?;
            if at(i) == 0 {
                return Ok(());
            }
        }
        i += 1;
        c = at(i);
        if c == 0 {
            acc.append(b"%")?;
            return Ok(());
        }
        let mut flags = Flags::default();
        let mut width: i64 = 0;
        let mut precision: i64 = -1;
        loop {
            let mut done = false;
            match c {
                b'-' => flags.left = true,
                b'+' => flags.prefix = b'+',
                b' ' => flags.prefix = b' ',
                b'#' => flags.alt = true,
                b'!' => flags.altform2 = true,
                b'0' => flags.zeropad = true,
                b',' => flags.thousand = b',',
                b'l' => {
                    i += 1;
                    c = at(i);
                    if c == b'l' {
                        i += 1;
                        c = at(i);
                    }
                    done = true;
                }
                b'1'..=b'9' => {
                    let mut wx = u32::from(c - b'0');
                    loop {
                        i += 1;
                        c = at(i);
                        if !c.is_ascii_digit() {
                            break;
                        }
                        wx = wx.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                    }
                    width = i64::from(wx & 0x7fff_ffff);
                    if c != b'.' && c != b'l' {
                        done = true;
                    } else {
                        i -= 1;
                    }
                }
                b'*' => {
                    width = i64::from(args.int() as i32);
                    if width < 0 {
                        flags.left = true;
                        width = if width >= -2_147_483_647 { -width } else { 0 };
                    }
                    c = at(i + 1);
                    if c != b'.' && c != b'l' {
                        i += 1;
                        c = at(i);
                        done = true;
                    }
                }
                b'.' => {
                    i += 1;
                    c = at(i);
                    if c == b'*' {
                        precision = i64::from(args.int() as i32);
                        if precision < 0 {
                            precision = if precision >= -2_147_483_647 {
                                -precision
                            } else {
                                -1
                            };
                        }
                        i += 1;
                        c = at(i);
                    } else {
                        let mut px: u32 = 0;
                        while c.is_ascii_digit() {
                            px = px.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                            i += 1;
                            c = at(i);
                        }
                        precision = i64::from(px & 0x7fff_ffff);
                    }
                    if c == b'l' {
                        i -= 1;
                    } else {
                        done = true;
                    }
                }
                _ => done = true,
            }
            if done {
                break;
            }
            i += 1;
            c = at(i);
            if c == 0 {
                break;
            }
        }
        let Some(info) = lookup(c) else {
            return Ok(());
        };
        if !convert(acc, info, flags, width, precision, args)? {
            return Ok(());
        }
        i += 1;
    }
}

/// One conversion: appends its rendering; `false` when the output ends here (`%T`, `%S`).
fn convert(
    acc: &mut Acc,
    info: &Info,
    mut flags: Flags,
    mut width: i64,
    mut precision: i64,
    args: &mut Args<'_, '_>,
) -> Result<bool, Stop> {
    let rendered: Cow<'_, [u8]>;
    match info.kind {
        Kind::Pointer | Kind::Ordinal | Kind::Radix | Kind::Decimal => {
            if info.kind != Kind::Decimal {
                flags.thousand = 0;
            }
            let (mut value, prefix) = if info.signed {
                let v = args.int();
                if v < 0 {
                    ((v as u64).wrapping_neg(), b'-')
                } else {
                    (v as u64, flags.prefix)
                }
            } else {
                (args.int() as u64, 0)
            };
            if value == 0 {
                flags.alt = false;
            }
            let has_prefix = i64::from(prefix != 0);
            if flags.zeropad && precision < width - has_prefix {
                precision = width - has_prefix;
            }
            if precision >= BUF_SIZE - 10 - BUF_SIZE / 3 {
                // printfTempBuf: the request alone may exceed the limit.
                let mut n = precision + 10;
                if flags.thousand != 0 {
                    n += precision / 3;
                }
                if n > acc.limit {
                    return Err(Stop::TooBig);
                }
            }
            let mut body: Vec<u8> = Vec::new();
            if info.kind == Kind::Ordinal {
                const ORD: &[u8; 8] = b"thstndrd";
                let mut x = (value % 10) as usize;
                if x >= 4 || (value / 10) % 10 == 1 {
                    x = 0;
                }
                body.push(ORD[x * 2 + 1]);
                body.push(ORD[x * 2]);
            }
            let cset = &DIGITS[info.charset..];
            let base = u64::from(info.base);
            loop {
                body.push(cset[(value % base) as usize]);
                value /= base;
                if value == 0 {
                    break;
                }
            }
            let length = body.len() as i64;
            if precision > length {
                let nn = (precision - length) as usize;
                body.try_reserve(nn).map_err(|_| Stop::NoMem)?;
                body.resize(body.len() + nn, b'0');
            }
            // `body` is reversed: insert a separator after every third character.
            if flags.thousand != 0 {
                let mut grouped = Vec::with_capacity(body.len() + body.len() / 3);
                for (k, &b) in body.iter().enumerate() {
                    if k > 0 && k % 3 == 0 {
                        grouped.push(flags.thousand);
                    }
                    grouped.push(b);
                }
                body = grouped;
            }
            if prefix != 0 {
                body.push(prefix);
            }
            if flags.alt && info.prefix != 0 {
                for &x in PREFIX[info.prefix..].iter().take_while(|&&x| x != 0) {
                    body.push(x);
                }
            }
            body.reverse();
            rendered = Cow::Owned(body);
        }
        Kind::Float | Kind::Exp | Kind::Generic => {
            let realvalue = args.double();
            if precision < 0 {
                precision = 6;
            }
            if precision > FP_PRECISION_LIMIT {
                precision = FP_PRECISION_LIMIT;
            }
            let e_char = DIGITS[info.charset];
            let room = acc.limit - acc.out.len() as i64;
            let out = render_float(realvalue, info.kind, precision, width, flags, e_char, room)?;
            // Padded already (the C code renders straight into the output and continues).
            acc.append(&out)?;
            return Ok(true);
        }
        Kind::Size => return Ok(true),
        Kind::Percent => rendered = Cow::Borrowed(b"%"),
        Kind::Char => {
            let t = args.text();
            let mut buf = [0u8; 4];
            let mut length = 1usize;
            if let Some(t) = t {
                let t: &[u8] = &t;
                let byte = |k: usize| t.get(k).copied().unwrap_or(0);
                let c = byte(0);
                buf[0] = c;
                if c & 0xc0 == 0xc0 {
                    while length < 4 && byte(length) & 0xc0 == 0x80 {
                        buf[length] = byte(length);
                        length += 1;
                    }
                }
            }
            let one = &buf[..length];
            if precision > 1 {
                let mut n_prior: i64 = 1;
                width -= precision - 1;
                if width > 1 && !flags.left {
                    acc.append_char(width - 1, b' ')?;
                    width = 0;
                }
                acc.append(one)?;
                precision -= 1;
                while precision > 1 {
                    if n_prior > precision - 1 {
                        n_prior = precision - 1;
                    }
                    let n_copy = length as i64 * n_prior;
                    acc.room(n_copy)?;
                    let from = acc.out.len() - n_copy as usize;
                    acc.out.extend_from_within(from..);
                    precision -= n_prior;
                    n_prior *= 2;
                }
            }
            flags.altform2 = true;
            rendered = Cow::Owned(one.to_vec());
        }
        Kind::String | Kind::DynString => {
            let t = args.text().unwrap_or(Cow::Borrowed(b""));
            let length = if precision >= 0 {
                if flags.altform2 {
                    let mut z = 0usize;
                    let byte = |k: usize| t.get(k).copied().unwrap_or(0);
                    while precision > 0 && byte(z) != 0 {
                        precision -= 1;
                        let b = byte(z);
                        z += 1;
                        if b >= 0xc0 {
                            while byte(z) & 0xc0 == 0x80 {
                                z += 1;
                            }
                        }
                    }
                    z
                } else {
                    (precision as u64).min(t.len() as u64) as usize
                }
            } else {
                t.len()
            };
            rendered = match t {
                Cow::Borrowed(b) => Cow::Borrowed(&b[..length]),
                Cow::Owned(mut o) => {
                    o.truncate(length);
                    Cow::Owned(o)
                }
            };
        }
        Kind::EscapeJLower | Kind::EscapeJUpper => {
            escape_json(acc, info.kind, flags, width, precision, args.text())?;
            return Ok(true);
        }
        Kind::EscapeQLower | Kind::EscapeQUpper | Kind::EscapeW => {
            let quoted = escape_quote(info.kind, &mut flags, precision, args.text(), acc.limit)?;
            rendered = Cow::Owned(quoted);
        }
        // Internal conversions: the SQL function's formatter returns at them.
        Kind::Token | Kind::SrcItem => return Ok(false),
    }
    // adjust_width_for_utf8
    if flags.altform2 && width > 0 {
        width += rendered.iter().filter(|&&b| b & 0xc0 == 0x80).count() as i64;
    }
    width -= rendered.len() as i64;
    if width > 0 {
        if !flags.left {
            acc.append_char(width, b' ')?;
        }
        acc.append(&rendered)?;
        if flags.left {
            acc.append_char(width, b' ')?;
        }
    } else {
        acc.append(&rendered)?;
    }
    Ok(true)
}

/// `%q`, `%Q`, `%w` (and `%#q`, `%#Q`: `unistr()`-style escapes of control characters): the
/// quoted text, before the field width is applied. `flags.alt` is cleared where SQLite
/// clears it.
fn escape_quote(
    kind: Kind,
    flags: &mut Flags,
    precision: i64,
    arg: Option<Cow<'_, [u8]>>,
    limit: i64,
) -> Result<Vec<u8>, Stop> {
    let mut need_quote = 0;
    let esc: Cow<'_, [u8]> = match arg {
        None if kind == Kind::EscapeQUpper => Cow::Borrowed(b"NULL"),
        None => Cow::Borrowed(b"(NULL)"),
        Some(t) => {
            if kind == Kind::EscapeQUpper {
                need_quote = 1;
            }
            t
        }
    };
    let q = if kind == Kind::EscapeW {
        flags.alt = false;
        b'"'
    } else {
        b'\''
    };
    let byte = |k: usize| esc.get(k).copied().unwrap_or(0);
    // The precision counts bytes (characters with `!`) of the input.
    let mut k = precision;
    let mut i = 0usize;
    let mut n: i64 = 0;
    while k != 0 {
        let ch = byte(i);
        if ch == 0 {
            break;
        }
        if ch == q {
            n += 1;
        }
        if flags.altform2 && ch & 0xc0 == 0xc0 {
            while byte(i + 1) & 0xc0 == 0x80 {
                i += 1;
            }
        }
        i += 1;
        k -= 1;
    }
    if flags.alt {
        let mut n_back: i64 = 0;
        let mut n_ctrl: i64 = 0;
        for k in 0..i {
            let b = byte(k);
            if b == b'\\' {
                n_back += 1;
            } else if b <= 0x1f {
                n_ctrl += 1;
            }
        }
        if n_ctrl > 0 || kind == Kind::EscapeQLower {
            n += n_back + 5 * n_ctrl;
            if kind == Kind::EscapeQUpper {
                n += 10;
                need_quote = 2;
            }
        } else {
            flags.alt = false;
        }
    }
    n += i as i64 + 3;
    if n > BUF_SIZE && n > limit {
        return Err(Stop::TooBig);
    }
    let mut out = Vec::new();
    out.try_reserve(n as usize).map_err(|_| Stop::NoMem)?;
    match need_quote {
        2 => out.extend_from_slice(b"unistr('"),
        1 => out.push(b'\''),
        _ => {}
    }
    for k in 0..i {
        let ch = byte(k);
        out.push(ch);
        if ch == q {
            out.push(ch);
        } else if flags.alt && ch == b'\\' {
            out.push(b'\\');
        } else if flags.alt && ch <= 0x1f {
            out.pop();
            out.extend_from_slice(b"\\u00");
            out.push(if ch >= 0x10 { b'1' } else { b'0' });
            out.push(HEX[usize::from(ch & 0xf)]);
        }
    }
    if need_quote != 0 {
        out.push(b'\'');
        if need_quote == 2 {
            out.push(b')');
        }
    }
    Ok(out)
}

/// `%j` (a JSON string's contents) and `%J` (a JSON string, `null` for NULL), with the field
/// width applied (in characters with `!`).
fn escape_json(
    acc: &mut Acc,
    kind: Kind,
    flags: Flags,
    width: i64,
    precision: i64,
    arg: Option<Cow<'_, [u8]>>,
) -> Result<(), Stop> {
    let start = acc.out.len();
    match arg {
        None => {
            if kind == Kind::EscapeJUpper {
                acc.append(b"null")?;
            }
        }
        Some(esc) => {
            if kind == Kind::EscapeJUpper {
                acc.append(b"\"")?;
            }
            let byte = |k: i64| {
                usize::try_from(k)
                    .ok()
                    .and_then(|k| esc.get(k).copied())
                    .unwrap_or(0)
            };
            let mut px = precision;
            if px < 0 {
                px = 0x7fff_ffff;
            } else if flags.altform2 {
                // The precision counts characters: convert it to bytes.
                let mut i = 0;
                while i < px && byte(i) != 0 {
                    if byte(i) & 0xc0 == 0x80 {
                        px += 1;
                    }
                    i += 1;
                }
                if i == px {
                    while byte(px) & 0xc0 == 0x80 {
                        px += 1;
                    }
                }
            }
            let mut i: i64 = 0;
            let mut j: i64 = 0;
            while i < px {
                let ch = byte(i);
                if ch <= 0x1f || ch == b'"' || ch == b'\\' {
                    if j < i {
                        acc.append(&esc[j as usize..i as usize])?;
                    }
                    j = i + 1;
                    if ch == 0 {
                        break;
                    }
                    acc.append(b"\\")?;
                    if ch > 0x1f {
                        acc.append(&[ch])?;
                    } else if (1u32 << ch) & 0x3700 != 0 {
                        acc.append(&[b"btn?fr"[usize::from(ch - 8)]])?;
                    } else {
                        acc.append(b"u00")?;
                        acc.append(&[HEX[usize::from(ch >> 4)], HEX[usize::from(ch & 0xf)]])?;
                    }
                }
                i += 1;
            }
            if j < i {
                acc.append(&esc[j as usize..i as usize])?;
            }
            if kind == Kind::EscapeJUpper {
                acc.append(b"\"")?;
            }
        }
    }
    if width > 0 {
        let n = (acc.out.len() - start) as i64;
        let mut len = n;
        if flags.altform2 && n > 0 {
            len -= acc.out[start..]
                .iter()
                .filter(|&&b| b & 0xc0 == 0x80)
                .count() as i64;
        }
        if width > len {
            let sp = width - len;
            acc.append_char(sp, b' ')?;
            if !flags.left && n > 0 {
                acc.out[start..].rotate_right(sp as usize);
            }
        }
    }
    Ok(())
}

/// `%f`, `%e`, `%E`, `%g`, `%G` of `realvalue`, padded to `width`, as `sqlite3_str_vappendf`
/// renders them (`precision` is already defaulted to 6 and capped). `room` is what the
/// length limit leaves: SQLite first asks for room for the longest rendering the width and
/// precision allow, and fails when that does not fit.
fn render_float(
    realvalue: f64,
    kind: Kind,
    mut precision: i64,
    width: i64,
    flags: Flags,
    e_char: u8,
    room: i64,
) -> Result<Vec<u8>, Stop> {
    let i_round: i64 = match kind {
        Kind::Float => -precision,
        Kind::Generic => {
            if precision == 0 {
                precision = 1;
            }
            precision
        }
        _ => precision + 1,
    };
    let mut s = fp_decode(
        realvalue,
        i_round as i32,
        if flags.altform2 { 20 } else { 16 },
    );
    if s.special != 0 {
        if s.special == 2 || !flags.zeropad {
            let text: &[u8] = if s.special == 2 {
                if flags.zeropad {
                    b"null"
                } else {
                    b"NaN"
                }
            } else if s.sign == b'-' {
                b"-Inf"
            } else if flags.prefix == b'+' {
                b"+Inf"
            } else if flags.prefix == b' ' {
                b" Inf"
            } else {
                b"Inf"
            };
            // Padded with spaces like a string.
            let pad = (width - text.len() as i64).max(0);
            if text.len() as i64 + pad >= room {
                return Err(Stop::TooBig);
            }
            let mut out = Vec::new();
            out.try_reserve((text.len() as i64 + pad) as usize)
                .map_err(|_| Stop::NoMem)?;
            if !flags.left {
                out.resize(pad as usize, b' ');
            }
            out.extend_from_slice(text);
            if flags.left {
                out.resize(out.len() + pad as usize, b' ');
            }
            return Ok(out);
        }
        s.set_digits(b"9", 1000);
    }
    let mut xtype = kind;
    let prefix = if s.sign == b'-' {
        if flags.alt && flags.prefix == 0 && xtype == Kind::Float && i64::from(s.idp) <= i_round {
            // A displayed zero under `#` with `%f` loses its minus sign.
            0
        } else {
            b'-'
        }
    } else {
        flags.prefix
    };
    let mut exp = s.idp - 1;
    let flag_rtz;
    if xtype == Kind::Generic {
        precision -= 1;
        flag_rtz = !flags.alt;
        if exp < -4 || i64::from(exp) > precision {
            xtype = Kind::Exp;
        } else {
            precision -= i64::from(exp);
            xtype = Kind::Float;
        }
    } else {
        flag_rtz = flags.altform2;
    }
    let mut e2: i64 = if xtype == Kind::Exp {
        0
    } else {
        i64::from(s.idp) - 1
    };
    let mut need = e2.max(0) + precision + width + 10;
    if flags.thousand != 0 && e2 > 0 {
        need += (e2 + 2) / 3;
    }
    if need >= room {
        return Err(Stop::TooBig);
    }
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve(need as usize).map_err(|_| Stop::NoMem)?;
    let flag_dp = precision > 0 || flags.alt || flags.altform2;
    if prefix != 0 {
        out.push(prefix);
    }
    let digits = s.digits();
    let sn = digits.len() as i64;
    let mut j: i64 = 0;
    if e2 < 0 {
        out.push(b'0');
    } else if flags.thousand != 0 {
        while e2 >= 0 {
            if j < sn {
                out.push(digits[j as usize]);
                j += 1;
            } else {
                out.push(b'0');
            }
            if e2 % 3 == 0 && e2 > 1 {
                out.push(flags.thousand);
            }
            e2 -= 1;
        }
    } else {
        j = (e2 + 1).min(sn);
        out.extend_from_slice(&digits[..j as usize]);
        e2 -= j;
        if e2 >= 0 {
            out.resize(out.len() + (e2 + 1) as usize, b'0');
            e2 = -1;
        }
    }
    if flag_dp {
        out.push(b'.');
    }
    if e2 < -1 && precision > 0 {
        let nn = (-1 - e2).min(precision);
        out.resize(out.len() + nn as usize, b'0');
        precision -= nn;
    }
    if precision > 0 {
        let nn = (sn - j).min(precision);
        if nn > 0 {
            out.extend_from_slice(&digits[j as usize..(j + nn) as usize]);
            precision -= nn;
        }
        if precision > 0 && !flag_rtz {
            out.resize(out.len() + precision as usize, b'0');
        }
    }
    if flag_rtz && flag_dp {
        while out.last() == Some(&b'0') {
            out.pop();
        }
        if out.last() == Some(&b'.') {
            if flags.altform2 {
                out.push(b'0');
            } else {
                out.pop();
            }
        }
    }
    if xtype == Kind::Exp {
        exp = s.idp - 1;
        out.push(e_char);
        if exp < 0 {
            out.push(b'-');
            exp = -exp;
        } else {
            out.push(b'+');
        }
        if exp >= 100 {
            out.push((exp / 100) as u8 + b'0');
            exp %= 100;
        }
        out.push((exp / 10) as u8 + b'0');
        out.push((exp % 10) as u8 + b'0');
    }
    let length = out.len() as i64;
    if length < width {
        let n_pad = (width - length) as usize;
        if flags.left {
            out.resize(out.len() + n_pad, b' ');
        } else {
            let (at, fill) = if !flags.zeropad {
                (0, b' ')
            } else {
                (usize::from(prefix != 0), b'0')
            };
            out.splice(at..at, std::iter::repeat_n(fill, n_pad));
        }
    }
    Ok(out)
}

/// `FpDecode`: a double's significant decimal digits, as `sqlite3FpDecode` computes them.
struct FpDecode {
    /// `zBuf`, with one spare slot in front for a carry.
    buf: [u8; 22],
    /// Where the digits start in `buf`.
    z: usize,
    /// How many digits.
    n: usize,
    /// Where the decimal point goes (digits before it).
    idp: i32,
    /// `+` or `-`.
    sign: u8,
    /// 1 for an infinity, 2 for a NaN.
    special: u8,
}

impl FpDecode {
    /// The significant digits.
    fn digits(&self) -> &[u8] {
        &self.buf[self.z..self.z + self.n]
    }

    /// Replaces the digits (SQLite's zero-padded infinity).
    fn set_digits(&mut self, digits: &[u8], idp: i32) {
        let z = self.buf.len() - digits.len();
        self.buf[z..].copy_from_slice(digits);
        self.z = z;
        self.n = digits.len();
        self.idp = idp;
    }
}

/// Where the digits of `zBuf[SQLITE_U64_DIGITS + 1]` end (one past the last).
const DIGITS_END: usize = 21;

/// `sqlite3FpDecode`: `r`'s digits rounded to `i_round` significant digits (when positive) or
/// to `-i_round` digits after the decimal point (otherwise), and to at most `mx_round`
/// significant digits; trailing zeros dropped.
fn fp_decode(mut r: f64, mut i_round: i32, mx_round: i32) -> FpDecode {
    let mut p = FpDecode {
        buf: [b'0'; 22],
        z: DIGITS_END - 1,
        n: 1,
        idp: 1,
        sign: b'+',
        special: 0,
    };
    if r < 0.0 {
        p.sign = b'-';
        r = -r;
    } else if r == 0.0 {
        return p;
    }
    let mut v = r.to_bits();
    let mut e = ((v >> 52) & 0x7ff) as i32;
    if e == 0x7ff {
        p.special = 1 + u8::from(v != 0x7ff0_0000_0000_0000);
        p.n = 0;
        p.idp = 0;
        return p;
    }
    v &= 0x000f_ffff_ffff_ffff;
    if e == 0 {
        let nn = v.leading_zeros() as i32;
        v = v.wrapping_shl(nn as u32);
        e = -1074 - nn;
    } else {
        v = (v << 11) | (1 << 63);
        e -= 1086;
    }
    let want = if i_round <= 0 || i_round >= 18 {
        18
    } else {
        i_round + 1
    };
    let (mut v, exp) = fp2_convert10(v, e, want);
    let mut i = DIGITS_END;
    loop {
        i -= 1;
        p.buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 || i == 1 {
            break;
        }
    }
    let mut n = DIGITS_END - i;
    p.idp = n as i32 + exp;
    if i_round <= 0 {
        i_round = p.idp - i_round;
        if i_round == 0 && p.buf[i] >= b'5' {
            i_round = 1;
            i -= 1;
            p.buf[i] = b'0';
            n += 1;
            p.idp += 1;
        }
    }
    let mut z = i;
    if i_round > 0 && ((i_round as usize) < n || n as i32 > mx_round) {
        if i_round > mx_round {
            i_round = mx_round;
        }
        let d = |k: usize| p.buf.get(z + k).copied().unwrap_or(0);
        if i_round == 17 {
            // With `!` and 17 digits, try a shorter form that reads back as the same double.
            if d(15) == b'9' && d(14) == b'9' {
                let mut jj = 14;
                while jj > 0 && d(jj - 1) == b'9' {
                    jj -= 1;
                }
                let v2 = if jj == 0 {
                    1
                } else {
                    digits_value(&p.buf[z..z + jj]) + 1
                };
                if r == fp10_convert2(v2, exp + n as i32 - jj as i32) {
                    i_round = jj as i32 + 1;
                }
            } else if p.idp >= n as i32 || (d(15) == b'0' && d(14) == b'0' && d(13) == b'0') {
                let mut jj = 13;
                while jj > 1 && d(jj - 1) == b'0' {
                    jj -= 1;
                }
                let v2 = digits_value(&p.buf[z..z + jj]);
                if r == fp10_convert2(v2, exp + n as i32 - jj as i32) {
                    i_round = jj as i32 + 1;
                }
            }
        }
        n = i_round as usize;
        if p.buf.get(z + n).copied().unwrap_or(0) >= b'5' {
            let mut j = n - 1;
            loop {
                p.buf[z + j] += 1;
                if p.buf[z + j] <= b'9' {
                    break;
                }
                p.buf[z + j] = b'0';
                if j == 0 {
                    // There is always a free slot in front (at most 19 digits, in 21 slots).
                    z = z.saturating_sub(1);
                    p.buf[z] = b'1';
                    n += 1;
                    p.idp += 1;
                    break;
                }
                j -= 1;
            }
        }
    }
    while n > 1 && p.buf[z + n - 1] == b'0' {
        n -= 1;
    }
    p.n = n;
    p.z = z;
    p
}

/// The number ASCII digits spell (at most 19 of them).
fn digits_value(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |v, &d| {
        v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
    })
}

/// `sqlite3Multiply128`: the high and low 64 bits of `a * b`.
fn mul128(a: u64, b: u64) -> (u64, u64) {
    let r = u128::from(a) * u128::from(b);
    ((r >> 64) as u64, r as u64)
}

/// `sqlite3Multiply160`: the upper 96 bits of `((a << 32) + a_lo) * b`, as the upper 64 and
/// the next 32.
fn mul160(a: u64, a_lo: u32, b: u64) -> (u64, u32) {
    let mut r = u128::from(a) * u128::from(b);
    r += (u128::from(a_lo) * u128::from(b)) >> 32;
    ((r >> 64) as u64, (r >> 32) as u32)
}

const POWERS_FIRST: i32 = -348;
const POWERS_LAST: i32 = 347;

/// `powerOfTen`: the top 64 bits of 10^p and the next 32.
fn power_of_ten(p: i32) -> (u64, u32) {
    const BASE: [u64; 27] = [
        0x8000000000000000,
        0xa000000000000000,
        0xc800000000000000,
        0xfa00000000000000,
        0x9c40000000000000,
        0xc350000000000000,
        0xf424000000000000,
        0x9896800000000000,
        0xbebc200000000000,
        0xee6b280000000000,
        0x9502f90000000000,
        0xba43b74000000000,
        0xe8d4a51000000000,
        0x9184e72a00000000,
        0xb5e620f480000000,
        0xe35fa931a0000000,
        0x8e1bc9bf04000000,
        0xb1a2bc2ec5000000,
        0xde0b6b3a76400000,
        0x8ac7230489e80000,
        0xad78ebc5ac620000,
        0xd8d726b7177a8000,
        0x878678326eac9000,
        0xa968163f0a57b400,
        0xd3c21bcecceda100,
        0x84595161401484a0,
        0xa56fa5b99019a5c8,
    ];
    const SCALE: [u64; 26] = [
        0x8049a4ac0c5811ae,
        0xcf42894a5dce35ea,
        0xa76c582338ed2621,
        0x873e4f75e2224e68,
        0xda7f5bf590966848,
        0xb080392cc4349dec,
        0x8e938662882af53e,
        0xe65829b3046b0afa,
        0xba121a4650e4ddeb,
        0x964e858c91ba2655,
        0xf2d56790ab41c2a2,
        0xc428d05aa4751e4c,
        0x9e74d1b791e07e48,
        0xcccccccccccccccc,
        0xcecb8f27f4200f3a,
        0xa70c3c40a64e6c51,
        0x86f0ac99b4e8dafd,
        0xda01ee641a708de9,
        0xb01ae745b101e9e4,
        0x8e41ade9fbebc27d,
        0xe5d3ef282a242e81,
        0xb9a74a0637ce2ee1,
        0x95f83d0a1fb69cd9,
        0xf24a01a73cf2dccf,
        0xc3b8358109e84f07,
        0x9e19db92b4e31ba9,
    ];
    const SCALE_LO: [u32; 26] = [
        0x205b896d, 0x52064cad, 0xaf2af2b8, 0x5a7744a7, 0xaf39a475, 0xbd8d794e, 0x547eb47b,
        0x0cb4a5a3, 0x92f34d62, 0x3a6a07f9, 0xfae27299, 0xaa97e14c, 0x775ea265, 0xcccccccc,
        0x00000000, 0x999090b6, 0x69a028bb, 0xe80e6f48, 0x5ec05dd0, 0x14588f14, 0x8f1668c9,
        0x6d953e2c, 0x4abdaf10, 0xbc633b39, 0x0a862f81, 0x6c07a2c2,
    ];
    let p = p.clamp(POWERS_FIRST, POWERS_LAST);
    let (g, n);
    if p < 0 {
        if p == -1 {
            return (SCALE[13], SCALE_LO[13]);
        }
        let (mut gg, mut nn) = (p / 27, p % 27);
        if nn != 0 {
            gg -= 1;
            nn += 27;
        }
        (g, n) = (gg, nn);
    } else if p < 27 {
        return (BASE[p as usize], 0);
    } else {
        (g, n) = (p / 27, p % 27);
    }
    let k = (g + 13) as usize;
    let s = SCALE[k];
    if n == 0 {
        return (s, SCALE_LO[k]);
    }
    let (mut x, mut lo) = mul160(s, SCALE_LO[k], BASE[n as usize]);
    if x & (1 << 63) == 0 {
        x = (x << 1) | u64::from((lo >> 31) & 1);
        lo = (lo << 1) | 1;
    }
    (x, lo)
}

/// `pwr10to2`: floor(log2(10^p)).
fn pwr10to2(p: i32) -> i32 {
    (p * 108853) >> 15
}

/// `pwr2to10`: floor(log10(2^p)).
fn pwr2to10(p: i32) -> i32 {
    (p * 78913) >> 18
}

/// `sqlite3Fp2Convert10`: `m * 2^e` (with `m`'s top bit set) as `d * 10^p` with at least `n`
/// significant digits in `d`.
fn fp2_convert10(m: u64, e: i32, n: i32) -> (u64, i32) {
    let p = n - 1 - pwr2to10(e + 63);
    let (pw, _) = power_of_ten(p);
    let (h, _) = mul128(m, pw);
    let d = if n == 18 {
        let h = h.wrapping_shr((-(e + pwr10to2(p) + 2)) as u32);
        (h.wrapping_add((h << 1) & 2)) >> 1
    } else {
        h.wrapping_shr((-(e + pwr10to2(p) + 1)) as u32)
    };
    (d, -p)
}

/// `sqlite3Fp10Convert2`: the double nearest `d * 10^p`.
fn fp10_convert2(d: u64, p: i32) -> f64 {
    if p < POWERS_FIRST {
        return 0.0;
    }
    if p > POWERS_LAST {
        return f64::INFINITY;
    }
    if d == 0 {
        return 0.0;
    }
    let b = 64 - d.leading_zeros() as i32;
    let lp = pwr10to2(p);
    let mut e = 53 - b - lp;
    if e > 1074 {
        if e >= 1130 {
            return 0.0;
        }
        e = 1074;
    }
    let s = -(e - (64 - b) + lp + 3);
    let (mut pwr10h, mut pwr10l) = power_of_ten(p);
    if pwr10l != 0 {
        pwr10h = pwr10h.wrapping_add(1);
        pwr10l = !pwr10l;
    }
    let x = d.wrapping_shl((64 - b) as u32);
    let (mut hi, lo) = mul128(x, pwr10h);
    let mid1 = (lo >> 32) as u32;
    let mut sticky: u64 = 1;
    if hi & (1u64.wrapping_shl(s as u32).wrapping_sub(1)) == 0 {
        let (h2, _) = mul128(x, u64::from(pwr10l) << 32);
        let mid2 = (h2 >> 32) as u32;
        sticky = u64::from(mid1.wrapping_sub(mid2) > 1);
        hi = hi.wrapping_sub(u64::from(mid1 < mid2));
    }
    let mut u = hi.wrapping_shr(s as u32) | sticky;
    let adj = u >= (1u64 << 55) - 2;
    if adj {
        u = (u >> 1) | (u & 1);
        e -= 1;
    }
    let mut m = (u + 1 + ((u >> 2) & 1)) >> 2;
    if e <= -972 {
        return f64::INFINITY;
    }
    if m & (1 << 52) != 0 {
        m = (m & !(1u64 << 52)) | (((1075 - e) as u64) << 52);
    }
    f64::from_bits(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::{ToSqlOutput, ValueRef as SqlRef};

    /// What SQLite's `printf` returns for `args`: `Ok(None)` for NULL, `Ok(Some(bytes))` for
    /// text, `Err(message)` for an error.
    fn oracle(conn: &rusqlite::Connection, args: &[Value]) -> Result<Option<Vec<u8>>, String> {
        let marks: Vec<String> = (1..=args.len()).map(|k| format!("?{k}")).collect();
        let sql = format!("SELECT printf({})", marks.join(", "));
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| e.to_string())?;
        let params: Vec<ToSqlOutput<'_>> = args
            .iter()
            .map(|v| {
                ToSqlOutput::Borrowed(match v {
                    Value::Null => SqlRef::Null,
                    Value::Integer(i) => SqlRef::Integer(*i),
                    Value::Real(r) => SqlRef::Real(*r),
                    Value::Text(t) => SqlRef::Text(t),
                    Value::Blob(b) => SqlRef::Blob(b),
                })
            })
            .collect();
        let refs: Vec<&dyn rusqlite::ToSql> =
            params.iter().map(|p| p as &dyn rusqlite::ToSql).collect();
        stmt.query_row(refs.as_slice(), |row| {
            Ok(match row.get_ref(0)? {
                SqlRef::Null => None,
                SqlRef::Text(t) => Some(t.to_vec()),
                other => Some(format!("unexpected {other:?}").into_bytes()),
            })
        })
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(_, Some(m)) => m,
            e => e.to_string(),
        })
    }

    /// Ours, in the oracle's shape.
    fn ours(args: &[Value], limit: i64) -> Result<Option<Vec<u8>>, String> {
        let refs: Vec<ValueRef<'_>> = args.iter().map(Value::as_ref).collect();
        printf_limited(&refs, limit).map(|v| match v {
            Value::Null => None,
            Value::Text(t) => Some(t),
            other => Some(format!("unexpected {other:?}").into_bytes()),
        })
    }

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    /// Arguments with text shown as text.
    fn show_args(args: &[Value]) -> String {
        let shown: Vec<String> = args
            .iter()
            .map(|v| match v {
                Value::Text(t) => format!("Text({:?})", String::from_utf8_lossy(t)),
                other => format!("{other:?}"),
            })
            .collect();
        shown.join(", ")
    }

    fn show(r: &Result<Option<Vec<u8>>, String>) -> String {
        match r {
            Ok(None) => "NULL".to_string(),
            Ok(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
            Err(e) => format!("error {e:?}"),
        }
    }

    /// Arguments and the expected result (`Ok(None)` for NULL, `Err` for SQLite's message).
    type Case<'a> = (Vec<Value>, Result<Option<&'a [u8]>, &'a str>);

    /// Exact answers, each checked against SQLite too. The later ones are the mismatches the
    /// differential test found while this was written.
    #[test]
    fn printf_hand_picked() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let i = Value::Integer;
        let r = Value::Real;
        // A zero-padded infinity is a 9 and 999 zeros.
        let inf0 = format!("-9{}.000000", "0".repeat(999));
        let cases: Vec<Case<'_>> = vec![
            (vec![], Ok(None)),
            (vec![Value::Null, i(1)], Ok(None)),
            (vec![t("")], Ok(Some(b""))),
            (vec![t("%d")], Ok(Some(b"0"))),
            (vec![t("%s|%Q|%c.")], Ok(Some(b"|NULL|\0."))),
            (
                vec![t("%5d|%-5d|%05d|%+d|% d"), i(42), i(42), i(-42), i(7), i(7)],
                Ok(Some(b"   42|42   |-0042|+7| 7")),
            ),
            (
                vec![t("%,d %,d"), i(1234567), i(-1000)],
                Ok(Some(b"1,234,567 -1,000")),
            ),
            (
                vec![t("%d %u %x %X %o"), i(-1), i(-1), i(255), i(255), i(8)],
                Ok(Some(b"-1 18446744073709551615 ff FF 10")),
            ),
            (
                vec![t("%#x %#X %#o %#x"), i(255), i(255), i(8), i(0)],
                Ok(Some(b"0xff 0XFF 010 0")),
            ),
            (
                vec![t("%d"), i(i64::MIN)],
                Ok(Some(b"-9223372036854775808")),
            ),
            (
                vec![t("%.5d|%8.3d"), i(42), i(-7)],
                Ok(Some(b"00042|    -007")),
            ),
            (
                vec![t("%d %d %d"), t("12abc"), t(" 1e3"), r(-2.9)],
                Ok(Some(b"12 1 -2")),
            ),
            (
                vec![
                    t("%r %r %r %r %r %r"),
                    i(1),
                    i(2),
                    i(3),
                    i(11),
                    i(22),
                    i(113),
                ],
                Ok(Some(b"1st 2nd 3rd 11th 22nd 113th")),
            ),
            (vec![t("%p %#p"), i(255), i(255)], Ok(Some(b"FF 0xFF"))),
            (vec![t("a%nb%%c%5%")], Ok(Some(b"ab%c    %"))),
            (
                vec![t("%f %e %g"), r(1.23456), r(1.23456), r(1.23456)],
                Ok(Some(b"1.234560 1.234560e+00 1.23456")),
            ),
            (
                vec![t("%.20f"), r(0.1)],
                Ok(Some(b"0.10000000000000000000")),
            ),
            (
                vec![t("%!.20f"), r(0.1)],
                Ok(Some(b"0.1000000000000000056")),
            ),
            (
                vec![t("%.3f %.0f %.0f %#.0f"), r(2.0005), r(0.5), r(1.5), r(2.0)],
                Ok(Some(b"2.001 1 2 2.")),
            ),
            (
                vec![t("%g %g %g %g"), r(100000.0), r(1e6), r(1e-4), r(1e-5)],
                Ok(Some(b"100000 1e+06 0.0001 1e-05")),
            ),
            (
                vec![t("%G %E"), r(1.5e-10), r(-1.0)],
                Ok(Some(b"1.5E-10 -1.000000E+00")),
            ),
            (
                vec![t("%#g %!g %!.3g"), r(1.0), r(1.0), r(2.0)],
                Ok(Some(b"1.00000 1.0 2.0")),
            ),
            (
                vec![
                    t("%f %f %5f %-5f| %+f"),
                    r(f64::INFINITY),
                    r(f64::NEG_INFINITY),
                    r(f64::INFINITY),
                    r(f64::INFINITY),
                    r(f64::INFINITY),
                ],
                Ok(Some(b"Inf -Inf   Inf Inf  | +Inf")),
            ),
            (
                vec![t("%0f"), r(f64::NEG_INFINITY)],
                Ok(Some(inf0.as_bytes())),
            ),
            (
                vec![t("%f %#.2f %.2f"), r(-0.0), r(-0.001), r(-0.001)],
                Ok(Some(b"0.000000 0.00 -0.00")),
            ),
            (
                vec![t("%,.2f %,f"), r(1234567.891), r(-100.0)],
                Ok(Some(b"1,234,567.89 -100.000000")),
            ),
            (
                vec![t("%010.2f|%-10.2f|%+010.1e"), r(-3.5), r(3.5), r(12.0)],
                Ok(Some(b"-000003.50|3.50      |+001.2e+01")),
            ),
            (
                vec![t("%f %s"), t(" 12.5e3x"), r(0.1)],
                Ok(Some(b"12500.000000 0.1")),
            ),
            (
                vec![t("%s %s %s"), r(1e20), r(100.0), r(1.0 / 3.0)],
                Ok(Some(b"1.0e+20 100.0 0.33333333333333332")),
            ),
            (
                vec![
                    t("%.3s|%5s|%-5s|%.0s|"),
                    t("abcdef"),
                    t("ab"),
                    t("ab"),
                    t("x"),
                ],
                Ok(Some(b"abc|   ab|ab   ||")),
            ),
            (
                vec![
                    t("%.2s|%!.2s|%5s|%!5s|"),
                    t("héllo"),
                    t("héllo"),
                    t("é"),
                    t("é"),
                ],
                Ok(Some(b"h\xc3|h\xc3\xa9|   \xc3\xa9|    \xc3\xa9|")),
            ),
            (
                vec![t("%s|%z"), Value::Blob(b"a\0b".to_vec()), i(5)],
                Ok(Some(b"a|5")),
            ),
            (
                vec![
                    t("%c%c|%.3c|%5.2c|%-4c|"),
                    t("xyz"),
                    t("日本"),
                    t("ab"),
                    t("é"),
                    t("q"),
                ],
                Ok(Some(b"x\xe6\x97\xa5|aaa|   \xc3\xa9\xc3\xa9|q   |")),
            ),
            (
                vec![
                    t("%q|%Q|%Q|%w|%q"),
                    t("it's"),
                    t("it's"),
                    Value::Null,
                    t("a\"b"),
                    Value::Null,
                ],
                Ok(Some(b"it''s|'it''s'|NULL|a\"\"b|(NULL)")),
            ),
            (
                vec![t("%#q|%#Q|%#Q"), t("a\\b\n"), t("a\\b\n"), t("a\\b")],
                Ok(Some(b"a\\\\b\\u000a|unistr('a\\\\b\\u000a')|'a\\b'")),
            ),
            (
                vec![
                    t("%j|%J|%J|%.2J"),
                    t("a\"b\\\n\x01"),
                    t("x"),
                    Value::Null,
                    t("abc"),
                ],
                Ok(Some(b"a\\\"b\\\\\\n\\u0001|\"x\"|null|\"ab\"")),
            ),
            (
                vec![
                    t("%*d|%-*d|%*d|%.*f|%.*f"),
                    i(5),
                    i(1),
                    i(4),
                    i(2),
                    i(-3),
                    i(3),
                    i(2),
                    r(1.0),
                    i(-2),
                    r(1.0),
                ],
                Ok(Some(b"    1|2   |3  |1.00|1.00")),
            ),
            (
                vec![t("%ld %lld %lf %llx"), i(1), i(2), r(3.0), i(255)],
                Ok(Some(b"1 2 3.000000 ff")),
            ),
            (vec![t("ab%ycd%d"), i(1)], Ok(Some(b"ab"))),
            (vec![t("ab%Tcd")], Ok(Some(b"ab"))),
            (vec![t("ab%")], Ok(Some(b"ab%"))),
            (vec![t("ab%-5")], Ok(Some(b"ab"))),
            (vec![t("%d\0%d"), i(1), i(2)], Ok(Some(b"1"))),
            (
                vec![
                    t("%4294967297d|%2147483648d|%.4294967297f"),
                    i(5),
                    i(5),
                    r(1.0),
                ],
                Ok(Some(b"5|5|1.0")),
            ),
            (
                vec![
                    t("%*d|%*d|%.*f|"),
                    i(i64::MIN),
                    i(7),
                    i(i64::from(i32::MIN)),
                    i(7),
                    i(i64::from(i32::MIN)),
                    r(1.0),
                ],
                Ok(Some(b"7|7|1.000000|")),
            ),
            (
                vec![
                    t("%!.17g|%.15g|%!.15g|%!.20g|%!.20e"),
                    r(49.47),
                    r(0.1 + 0.2),
                    r(0.1 + 0.2),
                    r(0.1 + 0.2),
                    r(5e-324),
                ],
                Ok(Some(
                    b"49.47|0.3|0.3|0.300000000000000044|4.94065645841246544e-324",
                )),
            ),
            (vec![t("ab%\0cd")], Ok(Some(b"ab%"))),
            (
                vec![t("%c|%5c|%-3.2c|"), t(""), t(""), Value::Null],
                Ok(Some(b"\0|    \0|\0\0 |")),
            ),
            (
                vec![t("%,010d|%,.5d|%,d"), i(-12345), i(1), i(i64::MIN)],
                Ok(Some(b"-000,012,345|00,001|-9,223,372,036,854,775,808")),
            ),
            (
                vec![t("%!,.3f|%,g|%,e"), r(12345678.0), r(1234567.0), r(1234.5)],
                Ok(Some(b"12,345,678.0|1.23457e+06|1.234500e+03")),
            ),
            (
                vec![t("%#g|%#.3e|%#f|%#.0e"), r(0.0), r(0.0), r(-0.0), r(5.0)],
                Ok(Some(b"0.00000|0.000e+00|0.000000|5.e+00")),
            ),
            (vec![i(123)], Ok(Some(b"123"))),
            (vec![r(1.5)], Ok(Some(b"1.5"))),
            (vec![t("%1000000000s")], Err(TOO_BIG)),
            (vec![t("%.999999995d"), i(1)], Err(TOO_BIG)),
            (vec![t("%999999995.0f"), r(1.0)], Err(TOO_BIG)),
        ];
        let mut failures = Vec::new();
        for (args, expected) in &cases {
            let expected: Result<Option<Vec<u8>>, String> = expected
                .map(|o| o.map(<[u8]>::to_vec))
                .map_err(str::to_string);
            let got = ours(args, MAX_LENGTH);
            let sqlite = oracle(&conn, args);
            if got != expected || sqlite != expected {
                failures.push(format!(
                    "{}: expected {}, ours {}, SQLite {}",
                    show_args(args),
                    show(&expected),
                    show(&got),
                    show(&sqlite)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The floating-point precision cap (10^8 digits) is SQLite's: a 100 MB result.
    #[test]
    fn printf_precision_cap() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let args = [t("%.100000001f|"), Value::Real(0.5)];
        let got = ours(&args, MAX_LENGTH);
        assert_eq!(
            got.as_ref().map(|o| o.as_ref().map(Vec::len)),
            Ok(Some(100_000_003))
        );
        assert!(got == oracle(&conn, &args));
    }

    /// Our `%!.17g` of reals equals SQLite's own text of a real.
    #[test]
    fn printf_real_text_is_sqlites() {
        let mut rng = testkit::Rng::new(0x5eed_f00d);
        for k in 0..20_000 {
            let r = match k % 3 {
                0 => f64::from_bits(rng.next_u64()),
                1 => (rng.next_u64() % 1_000_000) as f64 / 10f64.powi((rng.next_u64() % 12) as i32),
                _ => f64::from_bits(rng.next_u64() >> (rng.next_u64() % 12)),
            };
            if r.is_nan() {
                continue;
            }
            assert_eq!(
                String::from_utf8_lossy(&real_text(r)),
                crate::value::real_to_text(r),
                "{r:?} ({:#x})",
                r.to_bits()
            );
        }
    }

    fn random_format(rng: &mut testkit::Rng) -> Vec<u8> {
        const LITERALS: &[&str] = &["abc", " ", "'", "\"", "é", "日", "%%", "x=", "\\", ""];
        const CONVERSIONS: &[u8] = b"dixXoucszqQwfeEgGpnr%jJdfgsdfegc";
        const INVALID: &[u8] = b"yTSkC\xc3";
        // Around the test's length limit and where the parser's `unsigned` wraps.
        const HUGE: &[&str] = &[
            "99990",
            "99996",
            "99999",
            "100000",
            "2147483647",
            "2147483648",
            "4294967295",
            "4294967297",
            "99999999999",
            "0005",
        ];
        let mut f = Vec::new();
        for _ in 0..1 + rng.below(4) {
            if rng.percent(40) {
                f.extend_from_slice(rng.pick(LITERALS).as_bytes());
            }
            f.push(b'%');
            if rng.percent(5) {
                // Any jumble of specification characters.
                for _ in 0..1 + rng.below(6) {
                    f.push(*rng.pick(b"-+ #!0,1234567890.*lxdfsc%"));
                }
                continue;
            }
            for _ in 0..rng.below(4) {
                f.push(*rng.pick(b"-+ #!0,"));
            }
            if rng.percent(50) {
                if rng.percent(20) {
                    f.push(b'*');
                } else if rng.percent(3) {
                    f.extend_from_slice(rng.pick(HUGE).as_bytes());
                } else {
                    f.extend_from_slice(rng.below(31).to_string().as_bytes());
                }
            }
            if rng.percent(50) {
                f.push(b'.');
                if rng.percent(20) {
                    f.push(b'*');
                } else if rng.percent(3) {
                    f.extend_from_slice(rng.pick(HUGE).as_bytes());
                } else if rng.percent(90) {
                    f.extend_from_slice(rng.below(31).to_string().as_bytes());
                }
            }
            if rng.percent(10) {
                f.extend_from_slice(if rng.percent(50) { b"l" } else { b"ll" });
            }
            if rng.percent(3) {
                f.push(*rng.pick(INVALID));
            } else if !rng.percent(2) {
                f.push(*rng.pick(CONVERSIONS));
            }
        }
        if rng.percent(30) {
            f.extend_from_slice(rng.pick(LITERALS).as_bytes());
        }
        f
    }

    fn random_value(rng: &mut testkit::Rng) -> Value {
        const TEXTS: &[&[u8]] = &[
            b" 12.5e3x",
            b"12abc",
            b"it's",
            b"a\"b",
            b"h\xc3\xa9llo",
            b"\xe6\x97\xa5\xe6\x9c\xac",
            b"a\\b\n",
            b"ctl\x01\x1f",
            b"",
            b"-0",
            b"0x10",
            b"1e400",
            b"-1e-400",
            b"\xff\xfe",
            b"\xc3",
            b"\xf0\x9f\x98\x80!",
            b"9223372036854775808",
            b"-12.75",
            b"  +3.5  ",
            b"a\0b",
            b".5",
            b"1e",
            b"x",
        ];
        match rng.below(10) {
            0 => Value::Null,
            1 => Value::Integer(*rng.pick(&[
                0,
                1,
                -1,
                7,
                42,
                255,
                1000,
                -1234567,
                i64::MIN,
                i64::MAX,
                99_990,
                99_999,
                100_000,
                -99_998,
                50_001,
                i64::from(i32::MAX),
                i64::from(i32::MIN),
                -i64::from(i32::MAX),
                (1 << 32) + 5,
                (1 << 32) - 3,
            ])),
            2 => Value::Integer(rng.next_u64() as i64 >> rng.below(64)),
            3 => Value::Real(*rng.pick(&[
                0.0,
                -0.0,
                0.1,
                0.5,
                1.5,
                2.5,
                -2.5,
                1e-5,
                123.456,
                5e-324,
                1e308,
                -1e308,
                f64::INFINITY,
                f64::NEG_INFINITY,
                1e16,
                1e23,
                0.3,
                1e-300,
                49.47,
                1.0 / 3.0,
                2.0 / 3.0,
                0.95,
                0.05,
                999999.5,
                0.000123456789,
            ])),
            4 => {
                let r = f64::from_bits(rng.next_u64());
                Value::Real(if r.is_nan() { 1.25 } else { r })
            }
            5 => {
                let m = (rng.next_u64() % 10_000_000) as f64;
                let e = rng.below(40) as i32 - 20;
                Value::Real(m * 10f64.powi(e) * if rng.percent(30) { -1.0 } else { 1.0 })
            }
            6 | 7 => Value::Text(rng.pick(TEXTS).to_vec()),
            8 => Value::Text(rng.below(100000).to_string().into_bytes()),
            _ => {
                let n = rng.below(5) as usize;
                Value::Blob((0..n).map(|_| *rng.pick(b"a1\0\xc3\xa9'.")).collect())
            }
        }
    }

    /// Random formats over random arguments of every storage class, against SQLite, both
    /// under a length limit of 10^5 bytes (so that a `*` width taken from a large argument
    /// fails at once instead of allocating up to a gigabyte, and the limit's edges are
    /// exercised). `CORESCAN_PRINTF_SEED` reruns one seed (and `CORESCAN_PRINTF_CASES` sets
    /// the count).
    #[test]
    fn printf_matches_sqlite_on_random_formats() {
        const LIMIT: i64 = 100_000;
        let seed = std::env::var("CORESCAN_PRINTF_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x7072_696e_7466_u64);
        let cases: usize = std::env::var("CORESCAN_PRINTF_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_000);
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        // SAFETY: the handle is the open connection's, used on this thread only.
        unsafe {
            libsqlite3_sys::sqlite3_limit(
                conn.handle(),
                libsqlite3_sys::SQLITE_LIMIT_LENGTH,
                LIMIT as std::ffi::c_int,
            );
        }
        let mut rng = testkit::Rng::new(seed);
        let mut failures = Vec::new();
        let (mut texts, mut errors, mut nulls) = (0, 0, 0);
        for _ in 0..cases {
            let mut args = vec![Value::Text(random_format(&mut rng))];
            if rng.percent(3) {
                args[0] = random_value(&mut rng);
            }
            for _ in 0..rng.below(7) {
                let v = match rng.below(8) {
                    0 => Value::Integer(rng.below(40) as i64 - 10),
                    _ => random_value(&mut rng),
                };
                args.push(v);
            }
            let got = ours(&args, LIMIT);
            let sqlite = oracle(&conn, &args);
            match &sqlite {
                Ok(Some(_)) => texts += 1,
                Ok(None) => nulls += 1,
                Err(_) => errors += 1,
            }
            if got != sqlite {
                failures.push(format!(
                    "printf({}): ours {}, SQLite {}",
                    show_args(&args),
                    show(&got),
                    show(&sqlite)
                ));
            }
        }
        eprintln!("seed {seed}: {cases} cases, {texts} texts, {nulls} NULLs, {errors} errors");
        assert!(
            failures.is_empty(),
            "seed {seed}: {} of {cases} differ:\n{}",
            failures.len(),
            failures
                .iter()
                .take(30)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
