//! Column lookup by name: case, quoting, column order and storage quirks.

use partitioner::format::{read_varint, BtreePageHeader};
use partitioner::{ColumnSource, PageFile, TablePlan};
use tempfile::tempdir;

use crate::{create_db, Layout};

#[test]
fn lower_case_quoted_and_reordered_columns() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "cols.db", Layout::pages(4096), |c| {
        c.execute_batch(
            r#"CREATE TABLE "line item" (
                 l_comment TEXT,
                 "L_Discount" DECIMAL(15,2) NOT NULL, -- quoted, mixed case
                 [l_quantity] INTEGER,
                 `l_extendedprice` REAL DEFAULT (0.0),
                 l_shipdate DATE CHECK (l_shipdate > '1990-01-01, or so'),
                 PRIMARY KEY (l_comment, l_shipdate)
               );
               INSERT INTO "line item" VALUES ('c', 0.05, 3, 10.5, '1994-02-01');"#,
        )
        .unwrap();
    });
    let plan = TablePlan::open(&path, "LINE ITEM").unwrap();
    assert_eq!(plan.table.name, "line item");
    assert_eq!(plan.column("L_DISCOUNT").unwrap(), 1);
    assert_eq!(plan.column("l_discount").unwrap(), 1);
    assert_eq!(plan.column("L_QUANTITY").unwrap(), 2);
    assert_eq!(plan.column("L_ExtendedPrice").unwrap(), 3);
    assert_eq!(plan.column("l_shipdate").unwrap(), 4);
    assert_eq!(plan.table.column_index("L_COMMENT"), Some(0));

    let err = plan.column("l_tax").unwrap_err().to_string();
    assert!(err.starts_with(&path.display().to_string()), "{err}");
    for part in [
        "\"line item\"",
        "\"l_tax\"",
        "l_comment, L_Discount, l_quantity",
    ] {
        assert!(err.contains(part), "{part} missing from: {err}");
    }
}

#[test]
fn rowid_alias_and_generated_columns() {
    let dir = tempdir().unwrap();
    let path = create_db(dir.path(), "gen.db", Layout::pages(4096), |c| {
        c.execute_batch(
            "CREATE TABLE g(
                 id INTEGER PRIMARY KEY,
                 a INT,
                 v INT GENERATED ALWAYS AS (a * 2) VIRTUAL,
                 s INT AS (a + 1) STORED,
                 b TEXT
             );
             INSERT INTO g(a, b) VALUES (5, 'x');",
        )
        .unwrap();
    });
    let plan = TablePlan::open(&path, "g").unwrap();
    assert_eq!(plan.column_source("id").unwrap(), ColumnSource::Rowid);
    assert!(plan.column("id").unwrap_err().to_string().contains("rowid"));
    assert_eq!(plan.column("a").unwrap(), 1);
    assert!(plan
        .column("v")
        .unwrap_err()
        .to_string()
        .contains("VIRTUAL"));
    assert_eq!(plan.column("s").unwrap(), 2);
    assert_eq!(plan.column("b").unwrap(), 3);

    // The stored record really has four fields (id as NULL, a, s, b): the virtual column is
    // absent, so the positions above are the ones a decoder must use.
    let file = PageFile::open(&path).unwrap();
    let mut page = file.page_buffer();
    file.read_page(plan.leaves[0], &mut page).unwrap();
    let header = BtreePageHeader::parse(&page, 0).unwrap();
    let cell = header.cell_offset(&page, 0, 0, page.len()).unwrap();
    let (_, n1) = read_varint(&page[cell..]).unwrap();
    let (_, n2) = read_varint(&page[cell + n1..]).unwrap();
    let record = &page[cell + n1 + n2..];
    let (header_len, mut at) = read_varint(record).unwrap();
    let mut serials = Vec::new();
    while at < header_len as usize {
        let (s, n) = read_varint(&record[at..]).unwrap();
        serials.push(s);
        at += n;
    }
    // NULL, int 5 (1 byte), int 6 (1 byte), text 'x'.
    assert_eq!(serials, [0, 1, 1, 15]);
}
