//! Structure-aware mutations of database images and WAL logs.
//!
//! Plain byte damage mostly yields files the first check refuses, so most mutations aim at
//! the fields a reader trusts: page and cell headers, cell pointers, child and overflow
//! pointers, varints, header fields, whole pages (swapped or copied), and, in a log, frame
//! headers and page images after which every checksum is recomputed, so that damage reaches
//! the code behind the checksum test.

use partitioner::wal::{checksum, WalHeader, FRAME_HEADER_SIZE, WAL_HEADER_SIZE};
use testkit::Rng;

/// Values that tend to sit on a boundary, for 32-bit page numbers, counts and sizes.
fn interesting_u32(rng: &mut Rng, pages: u32) -> u32 {
    let choices = [
        0,
        1,
        2,
        pages.saturating_sub(1),
        pages,
        pages.saturating_add(1),
        0x7fff_ffff,
        0x8000_0000,
        u32::MAX,
        1 << 18,
    ];
    if rng.below(3) == 0 {
        1 + rng.below(u64::from(pages.max(1))) as u32
    } else {
        choices[rng.below(choices.len() as u64) as usize]
    }
}

fn interesting_u16(rng: &mut Rng, page_size: usize) -> u16 {
    let p = page_size as u16;
    let choices = [0, 1, 7, 8, 12, 99, 100, 0x7fff, 0x8000, 0xffff];
    match rng.below(3) {
        0 => rng.next_u64() as u16,
        1 => p.wrapping_sub(rng.below(40) as u16),
        _ => choices[rng.below(choices.len() as u64) as usize],
    }
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    if let Some(b) = bytes.get_mut(at..at + 4) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

fn put_u16(bytes: &mut [u8], at: usize, v: u16) {
    if let Some(b) = bytes.get_mut(at..at + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

/// Where a page's b-tree header starts within the image.
fn btree_header(page: usize, page_size: usize) -> usize {
    (page - 1) * page_size + if page == 1 { 100 } else { 0 }
}

/// Offsets (in the image) of the cells of `page`, read from its cell pointer array.
fn cells(bytes: &[u8], page: usize, page_size: usize) -> Vec<usize> {
    let h = btree_header(page, page_size);
    let base = (page - 1) * page_size;
    let Some(&kind) = bytes.get(h) else {
        return Vec::new();
    };
    let header_len = if matches!(kind, 0x02 | 0x05) { 12 } else { 8 };
    let count = bytes
        .get(h + 3..h + 5)
        .map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])));
    (0..count.min(page_size / 2))
        .filter_map(|i| bytes.get(h + header_len + 2 * i..h + header_len + 2 * i + 2))
        .map(|b| base + usize::from(u16::from_be_bytes([b[0], b[1]])))
        .filter(|&at| at < bytes.len())
        .collect()
}

/// Applies one to four random mutations to a database image of `page_size`-byte pages.
pub fn mutate_db(rng: &mut Rng, bytes: &mut Vec<u8>, page_size: usize) {
    for _ in 0..1 + rng.below(4) {
        let pages = (bytes.len() / page_size).max(1);
        let page = 1 + rng.below(pages as u64) as usize;
        let h = btree_header(page, page_size).min(bytes.len().saturating_sub(1));
        let len = bytes.len().max(1);
        match rng.below(12) {
            0 => {
                let at = rng.below(len as u64) as usize;
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 => {
                // A page header or cell pointer byte.
                let at = h + rng.below(40) as usize;
                if let Some(b) = bytes.get_mut(at) {
                    *b = [0, 1, 0x05, 0x0d, 0x0a, 0x02, 0x7f, 0x80, 0xff][rng.below(9) as usize];
                }
            }
            2 => {
                // Cell count, content start or a cell pointer.
                let at = h + [3, 5, 8, 10, 12, 14][rng.below(6) as usize];
                put_u16(bytes, at, interesting_u16(rng, page_size));
            }
            3 => {
                // A child pointer, a right child, or an overflow pointer at a cell's end.
                let v = interesting_u32(rng, pages as u32);
                let cells = cells(bytes, page, page_size);
                let at = match (rng.below(3), cells.is_empty()) {
                    (0, _) | (_, true) => h + 8,
                    (1, false) => cells[rng.below(cells.len() as u64) as usize],
                    _ => {
                        let end = (page * page_size).min(bytes.len());
                        end.saturating_sub(4 + rng.below(64) as usize)
                    }
                };
                put_u32(bytes, at, v);
            }
            4 => {
                // A cell's payload-size or rowid varint made long, huge or cut.
                let cells = cells(bytes, page, page_size);
                if let Some(&at) = cells.get(rng.below(cells.len().max(1) as u64) as usize) {
                    let n = 1 + rng.below(9) as usize;
                    for k in 0..n {
                        if let Some(b) = bytes.get_mut(at + k) {
                            *b = if k + 1 < n {
                                0xff
                            } else {
                                rng.next_u64() as u8
                            };
                        }
                    }
                }
            }
            5 => {
                // A database header field.
                let at =
                    [16, 18, 19, 20, 21, 24, 28, 32, 36, 44, 52, 56, 92][rng.below(13) as usize];
                match at {
                    16 => put_u16(bytes, at, interesting_u16(rng, page_size)),
                    18..=21 => {
                        if let Some(b) = bytes.get_mut(at) {
                            *b = rng.next_u64() as u8;
                        }
                    }
                    _ => put_u32(bytes, at, interesting_u32(rng, pages as u32)),
                }
            }
            6 if pages > 1 => {
                let other = 1 + rng.below(pages as u64) as usize;
                swap_pages(bytes, page, other, page_size);
            }
            7 if pages > 1 => {
                let other = 1 + rng.below(pages as u64) as usize;
                let from = (other - 1) * page_size;
                let copy = bytes[from..from + page_size].to_vec();
                let to = (page - 1) * page_size;
                bytes[to..to + page_size].copy_from_slice(&copy);
            }
            8 => {
                // Truncation: mid-page or at a page boundary.
                let cut = if rng.below(2) == 0 {
                    rng.below(len as u64) as usize
                } else {
                    (rng.below(pages as u64) as usize) * page_size
                };
                bytes.truncate(cut);
            }
            9 => {
                // Trailing bytes or extra pages.
                let extra = rng.below(2 * page_size as u64) as usize;
                bytes.extend((0..extra).map(|_| rng.next_u64() as u8));
            }
            10 => {
                // A run of random bytes inside a page.
                let at = rng.below(len as u64) as usize;
                let n = 1 + rng.below(32) as usize;
                for b in bytes.iter_mut().skip(at).take(n) {
                    *b = rng.next_u64() as u8;
                }
            }
            _ => {
                // The free-block chain and fragmented-bytes fields.
                put_u16(bytes, h + 1, interesting_u16(rng, page_size));
                if let Some(b) = bytes.get_mut(h + 7) {
                    *b = rng.next_u64() as u8;
                }
            }
        }
    }
}

fn swap_pages(bytes: &mut [u8], a: usize, b: usize, page_size: usize) {
    if a == b {
        return;
    }
    let (lo, hi) = (a.min(b) - 1, a.max(b) - 1);
    let (left, right) = bytes.split_at_mut(hi * page_size);
    left[lo * page_size..(lo + 1) * page_size].swap_with_slice(&mut right[..page_size]);
}

/// Recomputes every frame's checksum in `wal` (frames keep their salts, so frames with
/// foreign salts stay invalid). Does nothing to a log whose header does not parse.
pub fn rechecksum(wal: &mut [u8]) {
    let Ok(header) = WalHeader::parse(wal) else {
        return;
    };
    let size = FRAME_HEADER_SIZE + header.page_size as usize;
    let mut running = header.checksum;
    for frame in wal[WAL_HEADER_SIZE..].chunks_exact_mut(size) {
        running = checksum(header.order, &frame[..8], running);
        running = checksum(header.order, &frame[FRAME_HEADER_SIZE..], running);
        frame[16..20].copy_from_slice(&running[0].to_be_bytes());
        frame[20..24].copy_from_slice(&running[1].to_be_bytes());
    }
}

/// Applies one to three mutations to a log whose database has `db_pages` pages in its file;
/// usually recomputes the checksums afterwards, so the damage is not simply cut off.
pub fn mutate_wal(rng: &mut Rng, wal: &mut Vec<u8>, db_pages: u32) {
    let page_size = wal
        .get(8..12)
        .map_or(1024, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .clamp(512, 65536) as usize;
    let frame_len = FRAME_HEADER_SIZE + page_size;
    for _ in 0..1 + rng.below(3) {
        let frames = wal.len().saturating_sub(WAL_HEADER_SIZE) / frame_len;
        let f = rng.below(frames.max(1) as u64) as usize;
        let start = WAL_HEADER_SIZE + f * frame_len;
        match rng.below(10) {
            0 => {
                // A frame's page number.
                put_u32(wal, start, interesting_u32(rng, db_pages + 8));
            }
            1 => {
                // A frame's commit size: a commit moved, removed, grown or shrunk.
                let v = match rng.below(3) {
                    0 => 0,
                    _ => interesting_u32(rng, db_pages + 8),
                };
                put_u32(wal, start + 4, v);
            }
            2 | 3 => {
                // The page image of a frame: b-tree damage that arrives through the log.
                let mut image = wal
                    .get(start + FRAME_HEADER_SIZE..start + frame_len)
                    .map(<[u8]>::to_vec);
                if let Some(image) = image.as_mut() {
                    mutate_page_image(rng, image);
                    wal[start + FRAME_HEADER_SIZE..start + frame_len].copy_from_slice(image);
                }
            }
            4 => {
                // Salts or a header field (page size, version, sequence) of the log.
                let at = [4, 8, 12, 16, 20][rng.below(5) as usize];
                let v = match at {
                    8 => [512, 1024, 2048, 4096, 65536, 1000, 0][rng.below(7) as usize],
                    _ => rng.next_u64() as u32,
                };
                put_u32(wal, at, v);
                if rng.below(2) == 0 {
                    // Keep the header valid so the new value is acted on.
                    let sum = checksum(order_of(wal), &wal[..24], [0, 0]);
                    put_u32(wal, 24, sum[0]);
                    put_u32(wal, 28, sum[1]);
                }
            }
            5 if frames > 1 => {
                // Two frames swapped, or one duplicated over another.
                let g = rng.below(frames as u64) as usize;
                let other = WAL_HEADER_SIZE + g * frame_len;
                let copy = wal[other..other + frame_len].to_vec();
                if rng.below(2) == 0 {
                    let mine = wal[start..start + frame_len].to_vec();
                    wal[other..other + frame_len].copy_from_slice(&mine);
                }
                wal[start..start + frame_len].copy_from_slice(&copy);
            }
            6 => {
                let cut = rng.below(wal.len().max(1) as u64) as usize;
                wal.truncate(cut);
            }
            7 => {
                let at = rng.below(wal.len().max(1) as u64) as usize;
                if let Some(b) = wal.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            8 => {
                // An appended copy of a frame, as a new commit of a random size.
                if let Some(frame) = wal.get(start..start + frame_len).map(<[u8]>::to_vec) {
                    wal.extend_from_slice(&frame);
                    let at = wal.len() - frame_len;
                    put_u32(wal, at + 4, interesting_u32(rng, db_pages + 8));
                }
            }
            _ => {
                // The checksum byte order flipped (the header stays valid).
                if let Some(b) = wal.get_mut(3) {
                    *b ^= 1;
                }
                let sum = checksum(order_of(wal), &wal[..24.min(wal.len())], [0, 0]);
                put_u32(wal, 24, sum[0]);
                put_u32(wal, 28, sum[1]);
            }
        }
    }
    if rng.below(5) != 0 {
        rechecksum(wal);
    }
}

fn order_of(wal: &[u8]) -> partitioner::wal::ChecksumOrder {
    match wal.get(3) {
        Some(b) if b & 1 == 1 => partitioner::wal::ChecksumOrder::BigEndian,
        _ => partitioner::wal::ChecksumOrder::LittleEndian,
    }
}

/// A few mutations confined to one page image (page number 2 or later: no database header).
pub fn mutate_page_image(rng: &mut Rng, page: &mut [u8]) {
    let page_size = page.len();
    let mut image = page.to_vec();
    // Reuse the image mutations on a two-page image whose second page is this one.
    let mut two = vec![0u8; page_size];
    two.append(&mut image);
    for _ in 0..1 + rng.below(3) {
        let before = two.len();
        mutate_db(rng, &mut two, page_size);
        two.resize(before, 0);
    }
    page.copy_from_slice(&two[page_size..]);
}
