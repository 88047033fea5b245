//! The SQL dialect corescan parses with: sqlparser's `SQLiteDialect` and what SQLite's
//! grammar has that it lacks (`x NOT GLOB p`, `x NOT MATCH p`, `x NOT REGEXP p`).
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

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        BASE.get_next_precedence(parser)
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        BASE.prec_value(prec)
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
            "SELECT a NOTNULL, b ISNULL, c IS NOT d, e == f, g << 2 | 3 & 4 FROM t",
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
    }
}
