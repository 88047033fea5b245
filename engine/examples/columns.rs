//! The first rows of a table's columns, read by one pinned executor per CPU; the scan stops
//! when the handle is dropped:  cargo run -p engine --example columns -- DB TABLE COLUMN...
use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, table, columns @ ..] = args.as_slice() else {
        return Err("usage: columns DB TABLE COLUMN...".into());
    };
    let spec = engine::ScanSpec::columns(db, table, columns);
    let mut shown = 0;
    'scan: for batch in engine::scan(spec)? {
        for row in batch?.rows {
            let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
            println!("{}", cells.join("|"));
            shown += 1;
            if shown == 10 {
                break 'scan; // dropping the scan cancels its executors
            }
        }
    }
    Ok(())
}
