//! The Kubernetes CEL libraries DRA selectors may use, registered on a `cel::Env`:
//! quantities (`quantity`, `isQuantity`, `sign`, `isInteger`, `asInteger`,
//! `asApproximateFloat`, `add`, `sub`, `isGreaterThan`, `isLessThan`, `compareTo`), semantic
//! versions (`semver`, `isSemver`, `major`, `minor`, `patch`, `isGreaterThan`, `isLessThan`,
//! `compareTo`) and the `cel.bind(name, value, expr)` macro.

use std::cmp::Ordering;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{CelBool, CelDouble, CelInt, CelString};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError};

use super::semver::Semver;
use super::values::{CelQuantity, CelSemver};

const NANO: i128 = 1_000_000_000;

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn ordering_int(o: Ordering) -> CelInt {
    CelInt::from(match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

fn quantity(text: &CelString<'_>) -> Result<CelQuantity, ExecutionError> {
    CelQuantity::parse(text.inner()).map_err(|e| fail("quantity", e))
}

fn is_quantity(text: &CelString<'_>) -> CelBool {
    CelBool::from(CelQuantity::parse(text.inner()).is_ok())
}

fn sign(q: &CelQuantity) -> CelInt {
    CelInt::from(q.nano.signum() as i64)
}

fn is_integer(q: &CelQuantity) -> CelBool {
    CelBool::from(q.nano % NANO == 0 && i64::try_from(q.nano / NANO).is_ok())
}

fn as_integer(q: &CelQuantity) -> Result<CelInt, ExecutionError> {
    if q.nano % NANO != 0 {
        return Err(fail("asInteger", "quantity is not an integer"));
    }
    i64::try_from(q.nano / NANO)
        .map(CelInt::from)
        .map_err(|_| fail("asInteger", "quantity does not fit in an int"))
}

fn as_approximate_float(q: &CelQuantity) -> CelDouble {
    CelDouble::from(q.nano as f64 / NANO as f64)
}

fn checked(function: &str, nano: Option<i128>) -> Result<CelQuantity, ExecutionError> {
    nano.filter(|n| n.unsigned_abs() <= (i64::MAX as u128) * (NANO as u128))
        .map(|nano| CelQuantity { nano })
        .ok_or_else(|| fail(function, "quantity overflow"))
}

fn add_quantity(a: &CelQuantity, b: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    checked("add", a.nano.checked_add(b.nano))
}

fn add_int(a: &CelQuantity, b: &CelInt) -> Result<CelQuantity, ExecutionError> {
    checked(
        "add",
        a.nano
            .checked_add(i128::from(*b.inner()).saturating_mul(NANO)),
    )
}

fn sub_quantity(a: &CelQuantity, b: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    checked("sub", a.nano.checked_sub(b.nano))
}

fn sub_int(a: &CelQuantity, b: &CelInt) -> Result<CelQuantity, ExecutionError> {
    checked(
        "sub",
        a.nano
            .checked_sub(i128::from(*b.inner()).saturating_mul(NANO)),
    )
}

fn quantity_is_greater_than(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    CelBool::from(a.nano > b.nano)
}

fn quantity_is_less_than(a: &CelQuantity, b: &CelQuantity) -> CelBool {
    CelBool::from(a.nano < b.nano)
}

fn quantity_compare_to(a: &CelQuantity, b: &CelQuantity) -> CelInt {
    ordering_int(a.nano.cmp(&b.nano))
}

fn semver(text: &CelString<'_>) -> Result<CelSemver, ExecutionError> {
    Semver::parse(text.inner())
        .map(CelSemver)
        .map_err(|e| fail("semver", e))
}

fn semver_normalize(
    text: &CelString<'_>,
    normalize: &CelBool,
) -> Result<CelSemver, ExecutionError> {
    let parsed = if *normalize.inner() {
        Semver::parse_normalized(text.inner())
    } else {
        Semver::parse(text.inner())
    };
    parsed.map(CelSemver).map_err(|e| fail("semver", e))
}

fn is_semver(text: &CelString<'_>) -> CelBool {
    CelBool::from(Semver::parse(text.inner()).is_ok())
}

fn is_semver_normalize(text: &CelString<'_>, normalize: &CelBool) -> CelBool {
    CelBool::from(if *normalize.inner() {
        Semver::parse_normalized(text.inner()).is_ok()
    } else {
        Semver::parse(text.inner()).is_ok()
    })
}

fn version_part(function: &str, n: u64) -> Result<CelInt, ExecutionError> {
    i64::try_from(n)
        .map(CelInt::from)
        .map_err(|_| fail(function, "version number does not fit in an int"))
}

fn major(v: &CelSemver) -> Result<CelInt, ExecutionError> {
    version_part("major", v.0.major)
}

fn minor(v: &CelSemver) -> Result<CelInt, ExecutionError> {
    version_part("minor", v.0.minor)
}

fn patch(v: &CelSemver) -> Result<CelInt, ExecutionError> {
    version_part("patch", v.0.patch)
}

fn semver_is_greater_than(a: &CelSemver, b: &CelSemver) -> CelBool {
    CelBool::from(a.0.precedence(&b.0) == Ordering::Greater)
}

fn semver_is_less_than(a: &CelSemver, b: &CelSemver) -> CelBool {
    CelBool::from(a.0.precedence(&b.0) == Ordering::Less)
}

fn semver_compare_to(a: &CelSemver, b: &CelSemver) -> CelInt {
    ordering_int(a.0.precedence(&b.0))
}

/// `cel.bind(name, value, expr)`: evaluates `value` once and makes it available as `name` in
/// `expr`, expanded (as cel-go does) into a comprehension over an empty list.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(name)) if name == "cel") {
        return Ok(None);
    }
    let (Some(body), Some(value), Some(var)) = (args.pop(), args.pop(), args.pop()) else {
        return Err(helper.new_error(0, "cel.bind needs three arguments"));
    };
    let Expr::Ident(name) = var.expr else {
        return Err(helper.new_error(var.id, "cel.bind: the first argument must be a name"));
    };
    target.take();
    let range = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let never = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
    let step = helper.next_expr(Expr::Ident(name.clone()));
    let bind = ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name,
        accu_init: value,
        loop_cond: never,
        loop_step: step,
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

/// Registers the Kubernetes libraries on `env`.
pub(crate) fn kubernetes(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn quantity: (CelString) -> Result<CelQuantity>)?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool)?;
    cel::add_member_overload!(env, fn sign: (CelQuantity) -> CelInt)?;
    cel::add_member_overload!(env, fn is_integer: (CelQuantity) -> CelBool)?;
    cel::add_member_overload!(env, fn as_integer: (CelQuantity) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn as_approximate_float: (CelQuantity) -> CelDouble)?;
    cel::add_member_overload!(env, fn add_quantity: (CelQuantity, CelQuantity) -> Result<CelQuantity>, name = "add")?;
    cel::add_member_overload!(env, fn add_int: (CelQuantity, CelInt) -> Result<CelQuantity>, name = "add")?;
    cel::add_member_overload!(env, fn sub_quantity: (CelQuantity, CelQuantity) -> Result<CelQuantity>, name = "sub")?;
    cel::add_member_overload!(env, fn sub_int: (CelQuantity, CelInt) -> Result<CelQuantity>, name = "sub")?;
    cel::add_member_overload!(env, fn quantity_is_greater_than: (CelQuantity, CelQuantity) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn quantity_is_less_than: (CelQuantity, CelQuantity) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn quantity_compare_to: (CelQuantity, CelQuantity) -> CelInt, name = "compareTo")?;

    cel::add_overload!(env, fn semver: (CelString) -> Result<CelSemver>)?;
    cel::add_overload!(env, fn semver_normalize: (CelString, CelBool) -> Result<CelSemver>, name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool)?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> CelBool, name = "isSemver")?;
    cel::add_member_overload!(env, fn major: (CelSemver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn minor: (CelSemver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn patch: (CelSemver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn semver_is_greater_than: (CelSemver, CelSemver) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn semver_is_less_than: (CelSemver, CelSemver) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn semver_compare_to: (CelSemver, CelSemver) -> CelInt, name = "compareTo")?;

    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    Ok(())
}
