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

/// The DEFAULT clause of the only column of `CREATE TABLE t(c {decl})`.
fn default_of(decl: &str) -> Option<DefaultClause> {
    let sql = format!("CREATE TABLE t(c {decl})");
    let t = parse_create_table(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    t.columns[0].default.clone()
}

fn constant(signs: &[Sign], literal: Literal) -> Option<DefaultClause> {
    Some(DefaultClause::Constant {
        signs: signs.to_vec(),
        literal,
    })
}

#[test]
fn default_literal_forms() {
    use Literal::*;
    use Sign::{Minus, Plus};
    let int = |s: &str| Integer(s.to_string());
    let float = |s: &str| Float(s.to_string());
    let text = |s: &str| Text(s.to_string());
    for (decl, expected) in [
        ("INT", None),
        ("INT DEFAULT 5", constant(&[], int("5"))),
        ("INT DEFAULT +5", constant(&[], int("5"))),
        ("INT DEFAULT -5", constant(&[Minus], int("5"))),
        ("REAL DEFAULT -0.06", constant(&[Minus], float("0.06"))),
        ("REAL DEFAULT - 0.06", constant(&[Minus], float("0.06"))),
        ("REAL DEFAULT 1e3", constant(&[], float("1e3"))),
        ("REAL DEFAULT 1E+3", constant(&[], float("1E+3"))),
        ("REAL DEFAULT 2.5e-3", constant(&[], float("2.5e-3"))),
        ("REAL DEFAULT .5", constant(&[], float(".5"))),
        ("REAL DEFAULT 5.", constant(&[], float("5."))),
        ("INT DEFAULT 0x1F", constant(&[], int("0x1F"))),
        ("INT DEFAULT -0X1f", constant(&[Minus], int("0X1f"))),
        ("INT DEFAULT 1_000_000", constant(&[], int("1000000"))),
        ("REAL DEFAULT 1_0.2_5e1_0", constant(&[], float("10.25e10"))),
        ("TEXT DEFAULT 'a''b'", constant(&[], text("a'b"))),
        ("TEXT DEFAULT ''", constant(&[], text(""))),
        ("TEXT DEFAULT 'x, (y'", constant(&[], text("x, (y"))),
        ("BLOB DEFAULT X'00ff'", constant(&[], Blob(vec![0, 0xff]))),
        ("BLOB DEFAULT x''", constant(&[], Blob(vec![]))),
        ("INT DEFAULT NULL", constant(&[], Null)),
        ("INT DEFAULT null NOT NULL", constant(&[], Null)),
        ("BOOLEAN DEFAULT TRUE", constant(&[], Bool(true))),
        ("BOOLEAN DEFAULT false", constant(&[], Bool(false))),
        // A bare or quoted identifier is a string; quoted TRUE is the text "true".
        ("TEXT DEFAULT abc", constant(&[], text("abc"))),
        ("TEXT DEFAULT \"true\"", constant(&[], text("true"))),
        ("TEXT DEFAULT [x y]", constant(&[], text("x y"))),
        // Parenthesised literals, with signs inside and out.
        ("REAL DEFAULT (0.06)", constant(&[], float("0.06"))),
        ("INT DEFAULT (-1)", constant(&[Minus], int("1"))),
        ("INT DEFAULT ((-(1)))", constant(&[Minus], int("1"))),
        ("INT DEFAULT (-(+1))", constant(&[Minus], int("1"))),
        ("INT DEFAULT (+(-1))", constant(&[Plus, Minus], int("1"))),
        (
            "INT DEFAULT (+ + - + 1)",
            constant(&[Plus, Minus], int("1")),
        ),
        ("INT DEFAULT (+1)", constant(&[Plus], int("1"))),
        ("INT DEFAULT (- -1)", constant(&[Minus, Minus], int("1"))),
        ("TEXT DEFAULT ('x')", constant(&[], text("x"))),
        ("INT DEFAULT (true)", constant(&[], Bool(true))),
        ("INT DEFAULT (NULL)", constant(&[], Null)),
        ("BLOB DEFAULT (X'AB')", constant(&[], Blob(vec![0xab]))),
        // What only SQLite can evaluate.
        (
            "TEXT DEFAULT CURRENT_TIMESTAMP",
            Some(DefaultClause::CurrentTime("CURRENT_TIMESTAMP".into())),
        ),
        (
            "TEXT DEFAULT current_date",
            Some(DefaultClause::CurrentTime("CURRENT_DATE".into())),
        ),
        (
            "TEXT DEFAULT (CURRENT_TIME)",
            Some(DefaultClause::CurrentTime("CURRENT_TIME".into())),
        ),
        (
            "REAL DEFAULT (round(1.5, 2))",
            Some(DefaultClause::Expression("(round(1.5,2))".into())),
        ),
        (
            "INT DEFAULT (1 + 2)",
            Some(DefaultClause::Expression("(1+2)".into())),
        ),
        // Inside parentheses an identifier is a column reference, not a string.
        (
            "TEXT DEFAULT (abc)",
            Some(DefaultClause::Expression("(abc)".into())),
        ),
        (
            "TEXT DEFAULT (\"abc\")",
            Some(DefaultClause::Expression("(\"abc\")".into())),
        ),
    ] {
        assert_eq!(default_of(decl), expected, "{decl}");
    }
}

#[test]
fn defaults_do_not_disturb_the_rest_of_the_column() {
    let t = parse_create_table(
        "CREATE TABLE t(
            id INTEGER DEFAULT 7 PRIMARY KEY,
            a DECIMAL(15,2) NOT NULL DEFAULT -0.06 CHECK (a < 1),
            b TEXT DEFAULT 'PRIMARY KEY' COLLATE nocase,
            c DEFAULT (1, 2),
            d
        )",
    )
    .unwrap();
    assert_eq!(t.column_names(), ["id", "a", "b", "c", "d"]);
    assert_eq!(t.rowid_alias(), Some(0));
    assert_eq!(t.columns[1].declared_type, "DECIMAL(15,2)");
    assert_eq!(
        t.columns[1].default,
        constant(&[Sign::Minus], Literal::Float("0.06".into()))
    );
    assert!(!t.columns[2].rowid_alias);
    assert_eq!(
        t.columns[3].default,
        Some(DefaultClause::Expression("(1,2)".into()))
    );
    assert_eq!(t.columns[4].default, None);
}

#[test]
fn malformed_defaults_are_errors_or_expressions_never_panics() {
    for decl in [
        "INT DEFAULT",
        "INT DEFAULT -",
        "INT DEFAULT ,",
        "BLOB DEFAULT X'0'",
    ] {
        let sql = format!("CREATE TABLE t(c {decl})");
        assert!(parse_create_table(&sql).is_err(), "{sql}");
    }
    for (decl, text) in [
        ("INT DEFAULT 1abc", "1abc"),
        ("INT DEFAULT 1__0", "1__0"),
        ("INT DEFAULT 1_", "1_"),
        ("INT DEFAULT 0x_1", "0x_1"),
        ("REAL DEFAULT 1e", "1e"),
    ] {
        assert_eq!(
            default_of(decl),
            Some(DefaultClause::Expression(text.into())),
            "{decl}"
        );
    }
    let sql = "CREATE TABLE t(a INT DEFAULT -(0x1F), b BLOB DEFAULT X'0aF1', c DEFAULT ((-.5e1)))";
    for end in 0..=sql.len() {
        if let Some(prefix) = sql.get(..end) {
            let _ = parse_create_table(prefix);
        }
    }
}

#[test]
fn collations_and_generated_expressions() {
    let t = parse_create_table(
        "CREATE TABLE t(
            a TEXT COLLATE NOCASE,
            b VARCHAR(8) NOT NULL COLLATE \"rev\" DEFAULT 'x',
            c CHECK (c COLLATE rtrim = 'x'),
            d TEXT COLLATE binary COLLATE RTRIM,
            v INT GENERATED ALWAYS AS (a || 'x, y' <= b) VIRTUAL,
            s AS ((a + 1) * 2) STORED
        )",
    )
    .unwrap();
    let coll: Vec<_> = t.columns.iter().map(|c| c.collation.as_deref()).collect();
    assert_eq!(
        coll,
        [Some("NOCASE"), Some("rev"), None, Some("RTRIM"), None, None]
    );
    assert_eq!(t.columns[1].declared_type, "VARCHAR(8)");
    let exprs: Vec<_> = t
        .columns
        .iter()
        .map(|c| c.generated_expr.as_deref())
        .collect();
    assert_eq!(
        exprs,
        [
            None,
            None,
            None,
            None,
            Some("a || 'x, y' <= b"),
            Some("( a + 1 ) * 2")
        ]
    );
    assert!(parse_create_table("CREATE TABLE t(a COLLATE)").is_err());
}
