//! Page-cache residency of a table, for `--io auto`: a warm table is read fastest through the
//! page cache, a cold one with direct I/O.
//!
//! Layering: a leaf (imports nothing from the crate); the backend policy asks it.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

/// How many of a sample of the table's pages are in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    /// Pages sampled.
    pub sampled: usize,
    /// Sampled pages found in the page cache.
    pub resident: usize,
}

impl Residency {
    /// The resident fraction, 0.0 to 1.0.
    pub fn fraction(&self) -> f64 {
        if self.sampled == 0 {
            0.0
        } else {
            self.resident as f64 / self.sampled as f64
        }
    }
}

/// Samples up to `max_samples` pages of `pages` (1-based numbers of `page_size`-byte pages),
/// evenly spread, and asks the kernel (`mincore`) which are in the page cache.
pub fn sample(
    path: &Path,
    page_size: u32,
    pages: &[u32],
    max_samples: usize,
) -> std::io::Result<Residency> {
    let file = File::open(path)?;
    if pages.is_empty() || file.metadata()?.len() == 0 {
        return Ok(Residency {
            sampled: 0,
            resident: 0,
        });
    }
    // SAFETY: read-only map used only for mincore; no byte of it is read.
    let map = unsafe { Mmap::map(&file)? };
    let os_page = page_size_of_os();
    let step = pages.len().div_ceil(max_samples.max(1));
    let mut vec = [0u8; 1];
    let (mut sampled, mut resident) = (0, 0);
    for &page in pages.iter().step_by(step.max(1)) {
        let offset = u64::from(page - 1) * u64::from(page_size);
        let start = (offset / os_page * os_page) as usize;
        if start >= map.len() {
            continue;
        }
        // SAFETY: the address lies inside the mapping and is page aligned; one vector byte
        // covers one OS page.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr().add(start) as *mut libc::c_void,
                1,
                vec.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        sampled += 1;
        resident += usize::from(vec[0] & 1);
    }
    Ok(Residency { sampled, resident })
}

fn page_size_of_os() -> u64 {
    // SAFETY: sysconf has no side effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}
