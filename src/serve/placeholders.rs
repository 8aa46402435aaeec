//! `?` placeholders, which ADBC, JDBC and Go's Flight SQL drivers write, numbered `$1, $2,
//! ...` in the order they stand in the statement: DataFusion binds numbered placeholders
//! only (a `?` is "Failed to parse placeholder id"), and a client binds its parameters in
//! the order of its `?`s. The numbering is done on the parsed statement, so a `?` inside a
//! string or a quoted name is left alone. The values bound are then checked against the
//! placeholders ([`bind`]).

use std::ops::ControlFlow;

use datafusion::common::ParamValues;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::{CopyToSource, Statement};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, Expr, Query, Statement as SqlStatement, Value,
    ValueWithSpan,
};
use datafusion::sql::sqlparser::tokenizer::Location;
use tonic::Status;

/// Numbers the `?` placeholders of `statement` in the order they stand; the number of them.
/// A statement that also has numbered placeholders (`$1`) is refused: which value a `?`
/// would take is then unclear.
pub(super) fn number_placeholders(statement: &mut Statement) -> Result<usize, Status> {
    // Where each `?` stands, in the order the walk meets them.
    let mut places: Vec<Location> = Vec::new();
    let mut numbered = false;
    let mut look = |expr: &Expr| {
        if let Expr::Value(ValueWithSpan {
            value: Value::Placeholder(p),
            span,
        }) = expr
        {
            match p.as_str() {
                "?" => places.push(span.start),
                _ => numbered = true,
            }
        }
        ControlFlow::<()>::Continue(())
    };
    // The walk never breaks: what it returns says nothing.
    let _ = match sql_tree(statement) {
        Some(Tree::Statement(s)) => visit_expressions(s, &mut look),
        Some(Tree::Query(q)) => visit_expressions(q, &mut look),
        None => ControlFlow::Continue(()),
    };
    if places.is_empty() {
        return Ok(0);
    }
    if numbered {
        return Err(Status::invalid_argument(
            "the statement has both ? and numbered ($1) placeholders: use one kind",
        ));
    }
    // Numbered by place in the text when every `?` has a place of its own; otherwise in
    // the walk's order (which follows the text for the statements the parser makes).
    let mut order: Vec<usize> = (0..places.len()).collect();
    let mut sorted = places.clone();
    sorted.sort_by_key(|l| (l.line, l.column));
    sorted.dedup();
    if places.iter().all(|l| l.line > 0) && sorted.len() == places.len() {
        order.sort_by_key(|&i| (places[i].line, places[i].column));
    }
    let mut number_of = vec![0usize; places.len()];
    for (n, &i) in order.iter().enumerate() {
        number_of[i] = n + 1;
    }
    let mut met = 0;
    let mut number = |expr: &mut Expr| {
        if let Expr::Value(ValueWithSpan {
            value: Value::Placeholder(p),
            ..
        }) = expr
        {
            if p == "?" {
                if let Some(n) = number_of.get(met) {
                    *p = format!("${n}");
                }
                met += 1;
            }
        }
        ControlFlow::<()>::Continue(())
    };
    let _ = match sql_tree_mut(statement) {
        Some(TreeMut::Statement(s)) => visit_expressions_mut(s, &mut number),
        Some(TreeMut::Query(q)) => visit_expressions_mut(q, &mut number),
        None => ControlFlow::Continue(()),
    };
    Ok(places.len())
}

/// `plan` with `parameters` bound to its placeholders (`$1` the first value): as many values
/// as placeholders, each of the type the plan expects of it or one that casts to it (an
/// integer for a float, a string for a timestamp), cast before the plan runs. A wrong count
/// or a value that cannot be cast is INVALID_ARGUMENT naming the parameter, not a failure
/// halfway through the answer.
pub(super) fn bind(plan: LogicalPlan, parameters: ParamValues) -> Result<LogicalPlan, Status> {
    let ParamValues::List(values) = parameters else {
        return plan
            .with_param_values(parameters)
            .map_err(|e| Status::invalid_argument(e.to_string()));
    };
    let expected = (plan.get_parameter_types())
        .map_err(|e| Status::invalid_argument(format!("the statement's placeholders: {e}")))?;
    if values.len() != expected.len() {
        return Err(Status::invalid_argument(format!(
            "{} parameter(s) bound, but the statement has {} placeholder(s)",
            values.len(),
            expected.len()
        )));
    }
    let mut cast = Vec::with_capacity(values.len());
    for (i, mut bound) in values.into_iter().enumerate() {
        let id = format!("${}", i + 1);
        let Some(wanted) = expected.get(&id) else {
            return Err(Status::invalid_argument(format!(
                "the statement's placeholders are not $1 to ${}: {id} is missing",
                expected.len()
            )));
        };
        if let Some(wanted) = wanted {
            if bound.value.data_type() != *wanted {
                let given = bound.value.data_type();
                bound.value = bound.value.cast_to(wanted).map_err(|_| {
                    Status::invalid_argument(format!(
                        "parameter {} is {given} ({}), which does not cast to the {wanted} \
                         its placeholder takes",
                        i + 1,
                        bound.value
                    ))
                })?;
            }
        }
        cast.push(bound);
    }
    (plan.with_param_values(ParamValues::List(cast)))
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The tree of sqlparser's nodes in a statement, where it has one.
enum Tree<'a> {
    Statement(&'a SqlStatement),
    Query(&'a Query),
}

enum TreeMut<'a> {
    Statement(&'a mut SqlStatement),
    Query(&'a mut Query),
}

fn sql_tree(statement: &Statement) -> Option<Tree<'_>> {
    match statement {
        Statement::Statement(s) => Some(Tree::Statement(s)),
        Statement::CopyTo(copy) => match &copy.source {
            CopyToSource::Query(query) => Some(Tree::Query(query)),
            CopyToSource::Relation(_) => None,
        },
        Statement::Explain(explain) => sql_tree(&explain.statement),
        Statement::CreateExternalTable(_) | Statement::Reset(_) => None,
    }
}

fn sql_tree_mut(statement: &mut Statement) -> Option<TreeMut<'_>> {
    match statement {
        Statement::Statement(s) => Some(TreeMut::Statement(s)),
        Statement::CopyTo(copy) => match &mut copy.source {
            CopyToSource::Query(query) => Some(TreeMut::Query(query)),
            CopyToSource::Relation(_) => None,
        },
        Statement::Explain(explain) => sql_tree_mut(&mut explain.statement),
        Statement::CreateExternalTable(_) | Statement::Reset(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::common::ScalarValue;
    use datafusion::sql::parser::DFParser;

    use super::*;

    fn numbered(sql: &str) -> Result<(usize, String), Status> {
        let mut statement = DFParser::parse_sql(sql).unwrap().pop_front().unwrap();
        let n = number_placeholders(&mut statement)?;
        Ok((n, statement.to_string()))
    }

    #[test]
    fn question_marks_are_numbered_as_they_stand() {
        let (n, sql) = numbered(
            "WITH w AS (SELECT * FROM t WHERE a = ?) SELECT ?, '?' AS q FROM w \
             JOIN u ON w.b = ? WHERE c IN (?, ?) LIMIT 3",
        )
        .unwrap();
        assert_eq!(n, 5);
        assert_eq!(
            sql,
            "WITH w AS (SELECT * FROM t WHERE a = $1) SELECT $2, '?' AS q FROM w \
             JOIN u ON w.b = $3 WHERE c IN ($4, $5) LIMIT 3"
        );
        let (n, sql) = numbered("COPY (SELECT * FROM t WHERE x > ?) TO 'o.zarr'").unwrap();
        assert_eq!(n, 1);
        assert!(sql.contains("x > $1"), "{sql}");
        assert_eq!(numbered("SELECT $1, 'a?'").unwrap().0, 0);
    }

    #[tokio::test]
    async fn values_bound_are_counted_and_cast_to_their_placeholders_types() {
        let ctx = datafusion::prelude::SessionContext::new();
        let sql = "SELECT x FROM (VALUES (1.5), (3.0)) t(x) WHERE x > $1";
        let plan = ctx.state().create_logical_plan(sql).await.unwrap();
        let values =
            |v: Vec<ScalarValue>| ParamValues::List(v.into_iter().map(Into::into).collect());
        // A string that is a number, cast to the Float64 `x` takes.
        let bound = bind(plan.clone(), values(vec![ScalarValue::from("2")])).unwrap();
        let rows = ctx
            .execute_logical_plan(bound)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        let refused = bind(plan.clone(), values(vec![ScalarValue::from("north")])).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused.message().contains("parameter 1 is Utf8"),
            "{}",
            refused.message()
        );
        let two = values(vec![ScalarValue::from(1.0), ScalarValue::from(2.0)]);
        let refused = bind(plan, two).unwrap_err();
        assert!(
            refused.message().contains("2 parameter(s) bound"),
            "{}",
            refused.message()
        );
    }

    #[test]
    fn both_kinds_are_refused() {
        let refused = numbered("SELECT ? + $1").unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    }
}
