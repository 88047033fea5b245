//! [`consistent`]: plan and scan until the answer comes from one committed state.
//!
//! Under SQLite's locks ([`partitioner::snapshot`]) a plan's snapshot cannot change, and the
//! first attempt answers. Where the locks could not be taken (`verify-retry`: no `-shm` to
//! lock, a file system without locks, the locks busy for every try) a scan can meet a commit
//! or a checkpoint; it then either fails with [`partitioner::Error::Changed`] at its end, or
//! fails earlier on pages of two versions that do not fit together, and the files are compared
//! to tell which. Either way the plan is made again and the scan rerun, up to
//! [`MAX_ATTEMPTS`] times; then one error line says the database kept changing.
//!
//! Every scanning command (`q6`, `explain`, `bench`, `query`) runs its plan-and-scan through
//! this one loop and copies the figures into its report with [`Consistent::report_into`].
//!
//! Layering: above [`crate::report`] and [`crate::error`]; it does not know what is scanned.

use std::path::Path;

use partitioner::TablePlan;

use crate::error::{Error, Result};
use crate::report::SnapshotReport;

/// Plans and scans tried before giving up on a database that changes during every scan.
pub const MAX_ATTEMPTS: u32 = 8;

/// A scan's value with the plan it was computed from and how many attempts it took.
#[derive(Debug)]
pub struct Consistent<T> {
    /// The plan of the attempt that answered (its snapshot is still held).
    pub plan: TablePlan,
    /// What the scan computed.
    pub value: T,
    /// Attempts made (1 when nothing changed).
    pub attempts: u32,
    /// Why each abandoned attempt was abandoned.
    pub changes: Vec<String>,
}

impl<T> Consistent<T> {
    /// Copies the attempt counts into `snapshot` and, when an attempt was abandoned, says so
    /// in `notice` (a report's `io.notice`).
    pub fn report_into(&self, snapshot: &mut SnapshotReport, notice: &mut Option<String>) {
        snapshot.attempts = self.attempts;
        snapshot.retries = self.attempts - 1;
        if let Some(last) = self.changes.last() {
            let line = format!(
                "snapshot: the database changed during {} attempt{} (last: {last}); answered \
                 from attempt {}",
                self.changes.len(),
                if self.changes.len() == 1 { "" } else { "s" },
                self.attempts
            );
            *notice = Some(match notice.take() {
                Some(n) => format!("{n}; {line}"),
                None => line,
            });
        }
    }
}

fn change_of(e: &Error) -> Option<String> {
    match e {
        Error::Plan(p) if p.is_change() => Some(p.to_string()),
        _ => None,
    }
}

/// Plans `db` with `plan` and scans with `scan` until one attempt reads one committed state
/// (see the module docs). Errors that are not caused by a change end the loop at once.
pub fn consistent<T>(
    db: &Path,
    mut plan: impl FnMut() -> partitioner::Result<TablePlan>,
    mut scan: impl FnMut(&TablePlan) -> Result<T>,
) -> Result<Consistent<T>> {
    let mut changes = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let planned = match plan() {
            Ok(p) => p,
            Err(e) if e.is_change() => {
                changes.push(e.to_string());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match scan(&planned) {
            Ok(value) => {
                return Ok(Consistent {
                    plan: planned,
                    value,
                    attempts: attempt,
                    changes,
                })
            }
            Err(e) => {
                if let Some(what) = change_of(&e) {
                    changes.push(what);
                    continue;
                }
                // A malformed page may be two versions of the table meeting mid-scan.
                match planned.check_unchanged() {
                    Err(c) if c.is_change() => changes.push(format!("{c} (after: {e})")),
                    _ => return Err(e),
                }
            }
        }
    }
    // The last change without its file name (the error names the file once).
    let prefix = format!("{}: ", db.display());
    let last = changes
        .last()
        .map_or("", |c| c.strip_prefix(&prefix).unwrap_or(c));
    Err(Error::Plan(partitioner::Error::Changed {
        path: db.to_path_buf(),
        what: format!(
            "the database changed during each of {MAX_ATTEMPTS} attempts to read one committed \
             state (SQLite's read locks could not be held); last: {last}"
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_that_keeps_changing_is_one_error_line_after_the_attempts() {
        let db = Path::new("/data/live.db");
        let mut planned = 0;
        let err = consistent(
            db,
            || {
                planned += 1;
                Err(partitioner::Error::Changed {
                    path: db.to_path_buf(),
                    what: format!("the log moved ({planned})"),
                })
            },
            |_| Ok(()),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(planned, MAX_ATTEMPTS);
        assert!(
            err.starts_with("/data/live.db: the database changed during each of 8"),
            "{err}"
        );
        assert!(
            err.contains("the log moved (8)") && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn other_errors_end_the_loop_at_once() {
        let db = Path::new("/data/live.db");
        let mut planned = 0;
        let err = consistent(
            db,
            || {
                planned += 1;
                Err(partitioner::Error::Invalid {
                    path: db.to_path_buf(),
                    what: "not a SQLite database".into(),
                })
            },
            |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(planned, 1);
        assert!(err.to_string().contains("not a SQLite database"));
    }
}
