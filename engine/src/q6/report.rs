//! [`Q6Report`]: Q6's answer beside the run's figures, the shape of `corescan q6 --json`.
//!
//! Layering: uses only the generic [`crate::report::RunReport`]; [`crate::q6::run`] builds it.

use serde::Serialize;

use crate::report::RunReport;

/// The result of one Q6 scan: the answer, and the run's report beside it (in JSON, one
/// object: `revenue` and `rows_matched` next to every field of [`RunReport`]). It dereferences
/// to the [`RunReport`], so `report.wall_s` reads as on any run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Q6Report {
    /// The revenue with four decimals, exact.
    pub revenue: String,
    /// Rows that satisfied Q6's filter.
    pub rows_matched: u64,
    /// Everything measured while computing it.
    #[serde(flatten)]
    pub run: RunReport,
}

impl Q6Report {
    /// The report of a run whose answer is `revenue` (four decimals) over `rows_matched` rows.
    pub fn from_run(run: RunReport, revenue: String, rows_matched: u64) -> Self {
        Q6Report {
            revenue,
            rows_matched,
            run,
        }
    }
}

impl std::ops::Deref for Q6Report {
    type Target = RunReport;

    fn deref(&self) -> &RunReport {
        &self.run
    }
}
