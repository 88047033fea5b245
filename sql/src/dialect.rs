//! The SQL dialect corescan parses with: sqlparser's `SQLiteDialect` and what SQLite's
//! grammar has that it lacks (`x NOT GLOB p`, `x NOT MATCH p`, `x NOT REGEXP p`), with two of
//! SQLite's precedences it does not follow: `LIKE`, `GLOB`, `MATCH` and `REGEXP` share `=`'s
//! level (`x LIKE p = 1` is `(x LIKE p) = 1`), and `IS` is a binary operator at that level
//! even before `NULL`, `TRUE` or `FALSE` (`x IS NULL > 1` is `x IS (NULL > 1)`).
//!
//! [`Sqlite`] delegates every method `SQLiteDialect` overrides and reports `SQLiteDialect`'s
//! type, so the parser's `dialect_of!(self is SQLiteDialect)` checks still hold; the test at
//! the end parses a corpus with both and requires the same trees.

use sqlparser::ast::{BinaryOperator, DataType, Expr, Statement, UnaryOperator};
use sqlparser::dialect::{BindPlaceholderStyle, Dialect, Precedence, SQLiteDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// SQLite's dialect as corescan parses it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sqlite;

const BASE: SQLiteDialect = SQLiteDialect {};

/// Delegates `fn name(&self) -> bool` methods to `SQLiteDialect`.
macro_rules! delegate_bool {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool { BASE.$name() })*
    };
}

impl Dialect for Sqlite {
    fn dialect(&self) -> std::any::TypeId {
        std::any::TypeId::of::<SQLiteDialect>()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        BASE.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        BASE.identifier_quote_style(identifier)
    }

    fn ordered_bind_placeholder_style(&self) -> Option<BindPlaceholderStyle> {
        BASE.ordered_bind_placeholder_style()
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        BASE.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        BASE.is_identifier_part(ch)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        BASE.parse_statement(parser)
    }

    fn parse_data_type(&self, parser: &mut Parser) -> Option<Result<DataType, ParserError>> {
        BASE.parse_data_type(parser)
    }

    /// `x NOT GLOB p` (and `NOT MATCH`, `NOT REGEXP`) as SQLite's parser reads it: `NOT`
    /// applied to the operator's call, at the operator's precedence.
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        if let Some(is) = self.parse_is(parser, expr) {
            return Some(is);
        }
        if next_is_isnull(parser) {
            parser.next_token();
            return Some(Ok(Expr::IsNull(Box::new(expr.clone()))));
        }
        let negated = matches!(&parser.peek_token_ref().token, Token::Word(w) if w.keyword == Keyword::NOT)
            && matches!(&parser.peek_nth_token_ref(1).token,
                Token::Word(w) if matches!(w.keyword, Keyword::GLOB | Keyword::MATCH | Keyword::REGEXP));
        if !negated {
            return BASE.parse_infix(parser, expr, precedence);
        }
        parser.next_token();
        let op = match parser.next_token().token {
            Token::Word(w) if w.keyword == Keyword::GLOB => BinaryOperator::Glob,
            Token::Word(w) if w.keyword == Keyword::MATCH => BinaryOperator::Match,
            _ => BinaryOperator::Regexp,
        };
        let right = match parser.parse_subexpr(precedence) {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(expr.clone()),
                op,
                right: Box::new(right),
            }))),
        }))
    }

    /// `SQLiteDialect`'s, and `x ISNULL` (SQLite's postfix `IS NULL`, at `=`'s level), which
    /// sqlparser does not know: it took `ISNULL` for an alias (`SELECT s ISNULL` showed `s`).
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        if next_is_isnull(parser) {
            return Some(Ok(self.prec_value(Precedence::Eq)));
        }
        BASE.get_next_precedence(parser)
    }

    /// `SQLiteDialect`'s, but for `LIKE` (with `GLOB`, `MATCH`, `REGEXP`, `NOT LIKE`...): at
    /// `=`'s level, left to right, as SQLite's grammar has them (`%left IS MATCH LIKE_KW
    /// BETWEEN IN ISNULL NOTNULL NE EQ`); sqlparser puts them one below, so the pattern of
    /// `x LIKE 'a' = 1` took the `= 1` in.
    fn prec_value(&self, prec: Precedence) -> u8 {
        match prec {
            Precedence::Like => BASE.prec_value(Precedence::Eq),
            other => BASE.prec_value(other),
        }
    }

    fn is_column_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        BASE.is_column_alias(kw, parser)
    }

    fn is_table_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        BASE.is_table_alias(kw, parser)
    }

    fn is_table_factor(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        BASE.is_table_factor(kw, parser)
    }

    fn between_low_bound_precedence(&self) -> u8 {
        BASE.between_low_bound_precedence()
    }

    delegate_bool!(
        supports_filter_during_aggregation,
        supports_start_transaction_modifier,
        supports_in_empty_list,
        supports_limit_comma,
        supports_asc_desc_in_column_definition,
        supports_dollar_placeholder,
        supports_notnull_operator,
        supports_is_operator,
        supports_comma_separated_trim,
        supports_numeric_literal_underscores,
        supports_double_eq_assignment,
        supports_string_literal_column_names,
        supports_cast_empty_data_type_to_unspecified,
        supports_national_string_literal,
        supports_parens_around_table_factor,
        supports_unterminated_block_comments,
        supports_over_keyword_as_column_alias,
        supports_indexed_by,
        supports_comma_join_constraint,
        supports_aggregate_order_by_with_empty_args,
        supports_bitwise_shift_operators,
        supports_in_table_expression,
    );
}

/// Whether the next token is the unquoted word `ISNULL`.
fn next_is_isnull(parser: &Parser) -> bool {
    matches!(&parser.peek_token_ref().token,
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("isnull"))
}

impl Sqlite {
    /// `x IS [NOT] y` as SQLite's grammar reads it: `IS` is a binary operator whose right
    /// operand is an expression binding tighter than `=` (`NULL > 1` in `x IS NULL > 1`), and
    /// a right operand that is exactly `NULL`, `TRUE` or `FALSE` (also in parentheses) makes
    /// the `IS NULL` test or the truth test (`TK_TRUTH`). sqlparser takes `IS NULL`, `IS
    /// TRUE` and `IS FALSE` as postfix operators and applies what follows to their result.
    /// `None` when the next token is not `IS`, or for `IS [NOT] DISTINCT FROM` (sqlparser's
    /// own parse).
    fn parse_is(&self, parser: &mut Parser, expr: &Expr) -> Option<Result<Expr, ParserError>> {
        let keyword = |n: usize| match &parser.peek_nth_token_ref(n).token {
            Token::Word(w) => Some(w.keyword),
            _ => None,
        };
        if keyword(0) != Some(Keyword::IS) {
            return None;
        }
        let negated = keyword(1) == Some(Keyword::NOT);
        if keyword(if negated { 2 } else { 1 }) == Some(Keyword::DISTINCT) {
            return None;
        }
        parser.next_token();
        if negated {
            parser.next_token();
        }
        let right = match parser.parse_subexpr(self.prec_value(Precedence::Eq)) {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        let mut bare = &right;
        while let Expr::Nested(inner) = bare {
            bare = inner;
        }
        let x = Box::new(expr.clone());
        use sqlparser::ast::Value as V;
        let value = match bare {
            Expr::Value(v) => Some(&v.value),
            _ => None,
        };
        Some(Ok(match (value, negated) {
            (Some(V::Null), false) => Expr::IsNull(x),
            (Some(V::Null), true) => Expr::IsNotNull(x),
            (Some(V::Boolean(true)), false) => Expr::IsTrue(x),
            (Some(V::Boolean(true)), true) => Expr::IsNotTrue(x),
            (Some(V::Boolean(false)), false) => Expr::IsFalse(x),
            (Some(V::Boolean(false)), true) => Expr::IsNotFalse(x),
            _ => Expr::BinaryOp {
                left: x,
                op: if negated {
                    BinaryOperator::IsNot
                } else {
                    BinaryOperator::Is
                },
                right: Box::new(right),
            },
        }))
    }
}

/// Parses `sql` in [`Sqlite`].
pub fn parse(sql: &str) -> Result<Vec<Statement>, ParserError> {
    Parser::parse_sql(&Sqlite, sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement parses to the tree `SQLiteDialect` gives it (a method it overrides and
    /// [`Sqlite`] does not delegate would show here), and `NOT GLOB` is `NOT (x GLOB p)`.
    #[test]
    fn same_trees_as_sqlite_dialect_and_not_glob() {
        let corpus = [
            "SELECT a, b AS c, [d], `e`, \"f\" FROM t INDEXED BY i WHERE x LIKE 'a%' ESCAPE '\\'",
            "SELECT a FROM t WHERE a GLOB 'x*' AND b MATCH 'y' OR c REGEXP 'z' LIMIT 3, 4",
            "SELECT count(*) FILTER (WHERE a > 1) OVER (PARTITION BY b) FROM t",
            "SELECT a NOTNULL, c IS NOT d, e == f, g << 2 | 3 & 4 FROM t",
            "SELECT CAST(a AS DECIMAL(10, 2)), trim(a, 'x'), ?1, ?, :name, @v, $w FROM t",
            "SELECT a FROM t WHERE a BETWEEN 1 AND 2 AND b NOT IN (1, 2) AND c IN ()",
            "SELECT a FROM t, u WHERE t.x = u.y ORDER BY 1 DESC NULLS LAST",
            "SELECT over FROM t AS window",
            "REPLACE INTO t VALUES (1)",
            "CREATE TABLE t (a INTEGER PRIMARY KEY ASC, b VARCHAR(10, 2), c)",
            "SELECT 1_000, N'x', x'ab' FROM t /* unterminated",
        ];
        for sql in corpus {
            let ours = parse(sql).map(|s| format!("{s:?}"));
            let theirs = Parser::parse_sql(&BASE, sql).map(|s| format!("{s:?}"));
            assert_eq!(
                ours.map_err(|e| e.to_string()),
                theirs.map_err(|e| e.to_string()),
                "{sql}"
            );
        }
        let not_glob = parse("SELECT a NOT GLOB 'x*' || 'y' AND b FROM t").unwrap();
        let spelled = parse("SELECT NOT (a GLOB 'x*' || 'y') AND b FROM t").unwrap();
        // The same tree but for the tokens' places.
        assert_eq!(not_glob[0].to_string(), spelled[0].to_string());
        assert!(parse("SELECT a NOT REGEXP 'x' FROM t").is_ok());
        // `b ISNULL` is the test, not `b AS ISNULL` (SQLiteDialect's reading).
        let isnull = parse("SELECT b ISNULL, c isnull = 1 FROM t WHERE d ISNULL").unwrap();
        assert_eq!(
            isnull[0].to_string(),
            "SELECT b IS NULL, c IS NULL = 1 FROM t WHERE d IS NULL"
        );
    }
}
