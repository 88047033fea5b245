//! One SQL query over a SQLite file, run by corescan's pinned executors, rows printed as they
//! come:  cargo run -p corescan-sql --example query -- DB "SELECT ..."
use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, sql] = args.as_slice() else {
        return Err("usage: query DB SQL".into());
    };
    // Plan the SQL against the file's schema, then scan on two executors.
    let spec =
        corescan_sql::scan_spec(db.as_ref(), sql)?.with_placement(engine::Placement::Cores(2));
    let mut scan = engine::scan(spec)?;
    println!("{}", scan.names().join("|"));
    for batch in scan.by_ref() {
        for row in batch?.rows {
            let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
            println!("{}", cells.join("|"));
        }
    }
    if let Some(report) = scan.report() {
        eprintln!(
            "{} rows scanned in {:.3} s ({})",
            report.rows_scanned, report.wall_s, report.io.backend
        );
    }
    Ok(())
}
