//! [`run_q6`]: Q6 over a planned table, as a [`ScanKernel`] run by the generic coordinator.
//!
//! Layering: the top of [`crate::q6`] and of the crate: it uses the coordinator, the decoder,
//! the Q6 report and the settings; nothing imports it but [`crate::q6`]'s re-exports.

use partitioner::{DefaultValue, TablePlan};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::coordinator::{run_files, run_scan, FileScans, RangeOrder};
use crate::datatype3::{Affinity, Collation};
use crate::error::{Error, Result};
use crate::q6::decoder::{LeafDecoder, MissingValue, Q6ColumnTypes, Q6Columns};
use crate::q6::params::{PartialAggregate, Q6Filter, Q6Params};
use crate::q6::report::Q6Report;
use crate::scan::kernel::{RecordOutcome, ScanKernel, Spill};
use crate::settings::{ExecutorSpec, ScanSettings};

/// The four columns Q6 reads, in the order quantity, extended price, discount, ship date.
pub const Q6_COLUMNS: [&str; 4] = ["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"];

/// Finds the four Q6 columns of the plan's table by name.
pub fn q6_columns(plan: &TablePlan) -> Result<Q6Columns> {
    let [quantity, extended_price, discount, ship_date] = Q6_COLUMNS;
    Ok(Q6Columns {
        quantity: plan.column(quantity)?,
        extended_price: plan.column(extended_price)?,
        discount: plan.column(discount)?,
        ship_date: plan.column(ship_date)?,
    })
}

/// The affinity and collation of each Q6 column. A collation other than SQLite's built-in
/// ones was registered by the application that declared it; without it SQLite refuses the
/// query ("no such collation sequence"), and so does corescan, naming the column.
pub fn q6_column_types(plan: &TablePlan) -> Result<Q6ColumnTypes> {
    let mut types = Q6ColumnTypes::default();
    for (k, name) in Q6_COLUMNS.into_iter().enumerate() {
        let column = &plan.definition.columns[plan.column_index(name)?];
        types.affinity[k] = Affinity::of_column(column, plan.definition.strict);
        types.collation[k] = match column.collation.as_deref() {
            None => Collation::Binary,
            Some(c) => Collation::from_name(c).ok_or_else(|| {
                Error::Plan(partitioner::Error::Invalid {
                    path: plan.path.clone(),
                    what: format!(
                        "column {:?} of table {:?} is declared COLLATE {c}, a collation only \
                         the application that defined it can apply (SQLite too refuses: no \
                         such collation sequence: {c}); built in are BINARY, NOCASE and RTRIM",
                        column.name, plan.table.name
                    ),
                })
            })?,
        };
    }
    Ok(types)
}

/// What a record written before `ALTER TABLE ADD COLUMN` holds for column `name`.
fn missing_value(plan: &TablePlan, name: &str) -> MissingValue {
    match plan.column_default(name) {
        Ok(DefaultValue::Null) => MissingValue::Null,
        Ok(DefaultValue::Integer(i)) => MissingValue::Integer(i),
        Ok(DefaultValue::Real(x)) => MissingValue::Real(x),
        Ok(DefaultValue::Text(t)) => MissingValue::Text(t.into_bytes()),
        Ok(DefaultValue::Blob(_)) => MissingValue::Blob,
        // Only an error if some record really lacks the column.
        Err(e) => MissingValue::Unavailable(e.to_string()),
    }
}

/// Q6 as a scan kernel: the [`LeafDecoder`] and the executor's [`PartialAggregate`].
#[derive(Debug, Clone)]
pub struct Q6Kernel {
    decoder: LeafDecoder,
    agg: PartialAggregate,
}

impl Q6Kernel {
    /// The kernel of Q6 with `params` over `plan`'s table.
    pub fn new(plan: &TablePlan, params: &Q6Params) -> Result<Self> {
        let decoder = LeafDecoder::new(
            q6_columns(plan)?,
            Q6Filter::from(params),
            plan.header.usable_size(),
        )
        .with_types(&q6_column_types(plan)?)
        .with_defaults(Q6_COLUMNS.map(|name| missing_value(plan, name)));
        Ok(Q6Kernel {
            decoder,
            agg: PartialAggregate::default(),
        })
    }
}

impl ScanKernel for Q6Kernel {
    type Partial = PartialAggregate;

    #[inline]
    fn decode_page(
        &mut self,
        page_no: u32,
        page: &[u8],
        next: &[u8],
        spills: &mut Vec<Spill>,
    ) -> Result<(), String> {
        self.decoder
            .decode_page_ahead(page_no, page, next, &mut self.agg, spills)
    }

    fn eval_spill(
        &mut self,
        _spill: &Spill,
        payload: &[u8],
        complete: bool,
    ) -> Result<RecordOutcome, String> {
        self.decoder.eval_record(payload, complete, &mut self.agg)
    }

    fn rows(&self) -> u64 {
        self.agg.rows_scanned
    }

    fn finish(self) -> PartialAggregate {
        self.agg
    }
}

/// Runs TPC-H Q6 over `plan`'s table with one executor per entry of `executors`.
pub fn run_q6(
    plan: &TablePlan,
    executors: &[ExecutorSpec],
    params: &Q6Params,
    settings: &ScanSettings,
) -> Result<Q6Report> {
    let kernel = Q6Kernel::new(plan, params)?;
    let (partials, mut run) = run_scan(plan, settings, executors, kernel)?;
    let mut total = PartialAggregate::default();
    for (agg, executor) in partials.iter().zip(&mut run.executors) {
        executor.rows_kept = Some(agg.rows_matched);
        total.merge(agg);
    }
    Ok(Q6Report::from_run(
        run,
        total.revenue_text(),
        total.rows_matched,
    ))
}

/// Q6's side of a scan of several files: each file's kernel made from its own columns.
struct Q6Files {
    table: String,
    params: Q6Params,
}

impl FileScans<Q6Kernel> for Q6Files {
    type Bound = Q6Kernel;

    fn plan(&self, _file: usize, path: &Path) -> Result<Option<(TablePlan, Q6Kernel)>> {
        let plan = TablePlan::open_for_scan(path, &self.table)?;
        let kernel = Q6Kernel::new(&plan, &self.params)?;
        Ok(Some((plan, kernel)))
    }

    fn kernel(&self, _: usize, _: usize, _: usize, bound: &Q6Kernel, _: u32) -> Result<Q6Kernel> {
        Ok(bound.clone())
    }
}

/// Runs TPC-H Q6 over the table named `table` in every file of `paths` (one table spread over
/// them; see [`crate::run_files`]), with one executor per entry of `executors`. `probe` is a
/// plan of the table in one of the files, which chooses the I/O path.
pub fn run_q6_files(
    paths: Vec<PathBuf>,
    probe: &TablePlan,
    executors: &[ExecutorSpec],
    params: &Q6Params,
    settings: &ScanSettings,
) -> Result<Q6Report> {
    let scans = Arc::new(Q6Files {
        table: probe.table.name.clone(),
        params: *params,
    });
    let scan = run_files(
        Arc::new(paths),
        probe,
        settings,
        executors,
        RangeOrder::File,
        scans,
        || ((), usize::MAX),
    )?;
    let mut run = scan.report;
    let mut total = PartialAggregate::default();
    let mut kept = vec![0u64; run.executors.len()];
    for (u, agg) in scan.partials.iter().enumerate() {
        if let Some(agg) = agg {
            kept[scan.executor_of[u]] += agg.rows_matched;
            total.merge(agg);
        }
    }
    for (executor, kept) in run.executors.iter_mut().zip(kept) {
        executor.rows_kept = Some(kept);
    }
    Ok(Q6Report::from_run(
        run,
        total.revenue_text(),
        total.rows_matched,
    ))
}
