use super::*;

fn names(sql: &str) -> Vec<String> {
    parse_create_table(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .column_names()
}

#[test]
fn plain_columns() {
    assert_eq!(names("CREATE TABLE t(a, b, c)"), ["a", "b", "c"]);
    assert_eq!(
        names("create table t (a integer, b text not null, c real)"),
        ["a", "b", "c"]
    );
}

#[test]
fn every_quoting_style_and_escapes() {
    assert_eq!(
        names(r#"CREATE TABLE "my table"("a b" INT, [c d] TEXT, `e``f` REAL, 'g''h', "i""j")"#),
        ["a b", "c d", "e`f", "g'h", "i\"j"]
    );
    let t = parse_create_table(r#"CREATE TABLE "my table"(x)"#).unwrap();
    assert_eq!(t.name, "my table");
}

#[test]
fn keywords_quoted_as_names_are_columns() {
    assert_eq!(
        names(r#"CREATE TABLE t("primary" INT, [check], `unique`, "constraint")"#),
        ["primary", "check", "unique", "constraint"]
    );
}

#[test]
fn comments_are_skipped() {
    let sql = "CREATE TABLE t( -- the key, with a comma\n  a INT, /* b, c */ d TEXT /* trailing";
    // The unterminated block comment also swallows the closing parenthesis.
    assert!(parse_create_table(sql).is_err());
    let sql = "CREATE TABLE t( -- the key, with a comma\n  a INT, /* b, c */ d TEXT /* x */)";
    assert_eq!(names(sql), ["a", "d"]);
    assert_eq!(names("CREATE TABLE t(a /* ) */, b)"), ["a", "b"]);
}

#[test]
fn table_constraints_are_not_columns() {
    let sql = "CREATE TABLE lineitem (
        l_orderkey INTEGER NOT NULL,
        l_linenumber INTEGER NOT NULL,
        l_comment VARCHAR(44),
        PRIMARY KEY (l_orderkey, l_linenumber),
        UNIQUE (l_comment),
        CHECK (l_linenumber > 0 AND l_comment <> 'a,b'),
        CONSTRAINT fk FOREIGN KEY (l_orderkey) REFERENCES orders(o_orderkey),
        FOREIGN KEY (l_linenumber) REFERENCES x(y) ON DELETE CASCADE
    )";
    assert_eq!(names(sql), ["l_orderkey", "l_linenumber", "l_comment"]);
}

#[test]
fn types_with_arguments_and_defaults_with_commas() {
    let t = parse_create_table(
        "CREATE TABLE t(
            price DECIMAL(15, 2) NOT NULL DEFAULT (round(1.5, 2)),
            name VARCHAR(25) DEFAULT 'a, b (c',
            big UNSIGNED BIG INT,
            d DOUBLE PRECISION CHECK (d IN (1, 2, 3)) COLLATE nocase,
            e DEFAULT -1.5e-3,
            f NUMERIC(10) REFERENCES p(x, y) ON UPDATE SET NULL
        )",
    )
    .unwrap();
    let got: Vec<(&str, &str)> = t
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.declared_type.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("price", "DECIMAL(15,2)"),
            ("name", "VARCHAR(25)"),
            ("big", "UNSIGNED BIG INT"),
            ("d", "DOUBLE PRECISION"),
            ("e", ""),
            ("f", "NUMERIC(10)"),
        ]
    );
}

#[test]
fn if_not_exists_temp_and_schema_qualified_names() {
    let t = parse_create_table("CREATE TEMP TABLE IF NOT EXISTS main.\"LineItem\"(a)").unwrap();
    assert_eq!(t.schema.as_deref(), Some("main"));
    assert_eq!(t.name, "LineItem");
    assert_eq!(t.column_names(), ["a"]);
    let t = parse_create_table("CREATE TABLE [s].[t] (a)").unwrap();
    assert_eq!((t.schema.as_deref(), t.name.as_str()), (Some("s"), "t"));
}

#[test]
fn as_select_and_virtual_tables_are_refused() {
    let e = parse_create_table("CREATE TABLE t AS SELECT 1 AS a").unwrap_err();
    assert!(e.contains("AS SELECT"), "{e}");
    let e = parse_create_table("CREATE VIRTUAL TABLE t USING fts5(a, b)").unwrap_err();
    assert!(e.contains("virtual"), "{e}");
}

#[test]
fn malformed_statements_are_errors_not_panics() {
    for sql in [
        "",
        "CREATE",
        "CREATE TABLE",
        "CREATE TABLE t",
        "CREATE TABLE t(",
        "CREATE TABLE t()",
        "CREATE TABLE t(a,,b)",
        "CREATE TABLE t(a DECIMAL(15,2)",
        "CREATE TABLE t(\"a)",
        "CREATE TABLE t([a)",
        "CREATE TABLE t.(a)",
        "CREATE INDEX i ON t(a)",
        "SELECT 1",
        "CREATE TABLE t(a, ))",
    ] {
        assert!(parse_create_table(sql).is_err(), "{sql:?} parsed");
    }
    // Every prefix and every byte-level truncation of a rich statement is handled.
    let sql = "CREATE TABLE \"t\"(a DECIMAL(15,2) DEFAULT 'x,y', [b] TEXT, CHECK(a>0)) STRICT";
    for end in 0..=sql.len() {
        if let Some(prefix) = sql.get(..end) {
            let _ = parse_create_table(prefix);
        }
    }
}

#[test]
fn without_rowid_and_strict_options() {
    let t = parse_create_table("CREATE TABLE t(a PRIMARY KEY, b) WITHOUT ROWID").unwrap();
    assert!(t.without_rowid && !t.strict);
    let t = parse_create_table("CREATE TABLE t(a INT, b TEXT) STRICT, without rowid").unwrap();
    assert!(t.without_rowid && t.strict);
    let t = parse_create_table("CREATE TABLE t(without, rowid)").unwrap();
    assert!(!t.without_rowid);
}

#[test]
fn rowid_alias_rules() {
    let alias = |sql: &str| parse_create_table(sql).unwrap().rowid_alias();
    assert_eq!(
        alias("CREATE TABLE t(a, id INTEGER PRIMARY KEY, b)"),
        Some(1)
    );
    assert_eq!(alias("CREATE TABLE t(id integer primary key asc)"), Some(0));
    assert_eq!(alias("CREATE TABLE t(id INTEGER PRIMARY KEY DESC)"), None);
    assert_eq!(alias("CREATE TABLE t(id INT PRIMARY KEY)"), None);
    assert_eq!(
        alias("CREATE TABLE t(a, id INTEGER, PRIMARY KEY(id DESC))"),
        Some(1)
    );
    assert_eq!(
        alias("CREATE TABLE t(a INTEGER, b, PRIMARY KEY(a, b))"),
        None
    );
    assert_eq!(
        alias("CREATE TABLE t(id INTEGER PRIMARY KEY, b) WITHOUT ROWID"),
        None
    );
    assert_eq!(
        alias("CREATE TABLE t(a, b CHECK (b IN ('PRIMARY KEY')), c INTEGER)"),
        None
    );
}

#[test]
fn generated_columns_and_record_positions() {
    let t = parse_create_table(
        "CREATE TABLE t(
            a INT,
            v INT GENERATED ALWAYS AS (a * 2) VIRTUAL,
            s INT AS (a + 1) STORED,
            w AS (a || 'x, y'),
            b TEXT
        )",
    )
    .unwrap();
    let generated: Vec<_> = t.columns.iter().map(|c| c.generated).collect();
    assert_eq!(
        generated,
        [
            None,
            Some(Generated::Virtual),
            Some(Generated::Stored),
            Some(Generated::Virtual),
            None
        ]
    );
    let positions: Vec<_> = (0..6).map(|i| t.record_position(i)).collect();
    assert_eq!(positions, [Some(0), None, Some(1), None, Some(2), None]);
}

#[test]
fn tpch_lineitem_as_generated() {
    let sql = "CREATE TABLE LINEITEM ( L_ORDERKEY INTEGER NOT NULL, L_PARTKEY INTEGER NOT NULL,
        L_SUPPKEY INTEGER NOT NULL, L_LINENUMBER INTEGER NOT NULL,
        L_QUANTITY DECIMAL(15,2) NOT NULL, L_EXTENDEDPRICE DECIMAL(15,2) NOT NULL,
        L_DISCOUNT DECIMAL(15,2) NOT NULL, L_TAX DECIMAL(15,2) NOT NULL,
        L_RETURNFLAG CHAR(1) NOT NULL, L_LINESTATUS CHAR(1) NOT NULL,
        L_SHIPDATE DATE NOT NULL, L_COMMITDATE DATE NOT NULL, L_RECEIPTDATE DATE NOT NULL,
        L_SHIPINSTRUCT CHAR(25) NOT NULL, L_SHIPMODE CHAR(10) NOT NULL,
        L_COMMENT VARCHAR(44) NOT NULL);";
    let cols = names(sql);
    assert_eq!(cols.len(), 16);
    assert_eq!(cols[4], "L_QUANTITY");
    assert_eq!(cols[10], "L_SHIPDATE");
}
