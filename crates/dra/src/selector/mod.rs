//! CEL device selectors with the Kubernetes DRA environment, on the `cel` crate.
//!
//! The environment: the CEL standard library, the `strings` and `lists` extensions, the
//! Kubernetes quantity and semver libraries, `cel.bind`, and one variable, `device`, with
//! `driver`, `attributes[domain].name` (int, bool, string, or a semver for versions),
//! `capacity[domain].name` (quantities) and `allowMultipleAllocations`. A lookup in an unknown
//! domain gives an empty map; a missing attribute is an evaluation error (`has()` tests for it).
//!
//! Bounds: an expression longer than [`MAX_EXPRESSION_LEN`] bytes, with brackets nested deeper
//! than [`MAX_NESTING`] or a tree deeper than [`MAX_TREE_DEPTH`], with names other than `device`
//! and its own bound variables, or whose estimated cost (comprehensions multiply by their
//! range) exceeds [`MAX_COST`] is rejected when compiled, as the API server rejects it. Parsing
//! and the evaluation of deep expressions run on threads with stacks sized for them, so no
//! expression can overflow the caller's stack.

pub mod library;
pub mod semver;
pub mod values;

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString};
use cel::common::value::Val;
use cel::{Context, Env, Program, Value};

use self::semver::Semver;
use self::values::{CelQuantity, CelSemver, DomainMaps};

/// Longest expression accepted, as the API server's 10 Ki limit.
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;
/// Deepest nesting of brackets and of the parsed expression tree.
pub const MAX_NESTING: usize = 64;
/// Highest estimated evaluation cost accepted (the API server's `CELSelectorExpressionMaxCost`).
pub const MAX_COST: u64 = 1_000_000;
/// Iterations assumed for a comprehension over a range whose size is not known statically.
const UNKNOWN_RANGE: u64 = 100;
/// Deepest expression tree accepted.
pub const MAX_TREE_DEPTH: usize = 256;
/// Stack of the compiler thread (reserved, not committed, until used).
const COMPILE_STACK: usize = 64 << 20;
/// Expressions up to this deep are evaluated on the caller's stack.
const INLINE_DEPTH: usize = 12;
const EVALUATE_STACK_BASE: usize = 8 << 20;
const EVALUATE_STACK_PER_LEVEL: usize = 256 << 10;

/// An attribute value as CEL sees it.
#[derive(Debug, Clone, Copy)]
pub enum CelAttribute<'a> {
    Int(i64),
    Bool(bool),
    String(&'a str),
    Version(&'a Semver),
}

/// The `device` variable of one evaluation.
#[derive(Debug, Clone, Default)]
pub struct CelDevice<'a> {
    pub driver: &'a str,
    /// (domain, name, value), the domain already resolved (no domain means the driver).
    pub attributes: Vec<(&'a str, &'a str, CelAttribute<'a>)>,
    /// (domain, name, value in base units).
    pub capacity: Vec<(&'a str, &'a str, i64)>,
    pub allow_multiple_allocations: bool,
}

/// A compiled selector expression.
#[derive(Debug)]
pub struct CompiledExpression {
    pub text: String,
    program: Program,
    /// Depth of the expression tree (the interpreter's recursion depth).
    depth: usize,
}

/// The DRA CEL environment; compile once, evaluate many times.
#[derive(Clone)]
pub struct CelEnvironment {
    env: Arc<Env>,
}

impl std::fmt::Debug for CelEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CelEnvironment")
    }
}

impl Default for CelEnvironment {
    fn default() -> Self {
        Self::new()
    }
}

impl CelEnvironment {
    pub fn new() -> Self {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .and_then(|_| env.add_extension(cel::extensions::lists))
            .and_then(|_| env.add_extension(cel::extensions::math))
            .and_then(|_| env.add_extension(library::kubernetes))
            .expect("the DRA CEL libraries declare no overload twice");
        CelEnvironment { env: Arc::new(env) }
    }

    /// Compiles `text`, or says why it is not a valid DRA selector.
    ///
    /// Parsing recurses once per nesting level, so it runs on a thread of its own with a
    /// large stack: no input can overflow the caller's stack.
    pub fn compile(&self, text: &str) -> Result<CompiledExpression, String> {
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("cel-compile".into())
                .stack_size(COMPILE_STACK)
                .spawn_scoped(scope, || self.compile_here(text))
                .map_err(|e| format!("cannot start the CEL compiler: {e}"))?
                .join()
                .map_err(|_| "the CEL compiler failed on this expression".to_string())?
        })
    }

    fn compile_here(&self, text: &str) -> Result<CompiledExpression, String> {
        if text.len() > MAX_EXPRESSION_LEN {
            return Err(format!(
                "expression is {} bytes long, more than the limit of {MAX_EXPRESSION_LEN}",
                text.len()
            ));
        }
        if bracket_depth(text) > MAX_NESTING {
            return Err(format!(
                "expression nests brackets more than {MAX_NESTING} deep"
            ));
        }
        let program = self.env.compile(text).map_err(|e| {
            let message = e.to_string();
            let message = message.trim();
            if message.is_empty() {
                "syntax error".to_string()
            } else {
                message.to_string()
            }
        })?;
        let root = program.expression();
        let mut scope = Vec::new();
        let depth = check(root, &mut scope, 0)?;
        let cost = cost(root);
        if cost > MAX_COST {
            return Err(format!(
                "estimated cost {cost} exceeds the limit of {MAX_COST}; simplify the expression"
            ));
        }
        Ok(CompiledExpression {
            text: text.to_string(),
            program,
            depth,
        })
    }

    /// Evaluates a compiled selector for one device: `Ok(true)` when it selects the device,
    /// `Err` with the reason when evaluation fails or the result is not a bool.
    ///
    /// The interpreter recurses once per level of the expression tree; deep expressions are
    /// evaluated on a thread with a stack sized for them.
    pub fn evaluate(
        &self,
        expr: &CompiledExpression,
        device: &CelDevice<'_>,
    ) -> Result<bool, String> {
        if expr.depth <= INLINE_DEPTH {
            return self.evaluate_here(expr, device);
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("cel-evaluate".into())
                .stack_size(EVALUATE_STACK_BASE + expr.depth * EVALUATE_STACK_PER_LEVEL)
                .spawn_scoped(scope, || self.evaluate_here(expr, device))
                .map_err(|e| format!("cannot start the CEL evaluator: {e}"))?
                .join()
                .map_err(|_| "the CEL evaluator failed on this expression".to_string())?
        })
    }

    fn evaluate_here(
        &self,
        expr: &CompiledExpression,
        device: &CelDevice<'_>,
    ) -> Result<bool, String> {
        let mut context = Context::with_env(self.env.clone());
        context.add_variable_as_val("device", device_value(device));
        let result = Value::resolve_val(expr.program.expression(), &context);
        match result {
            Ok(v) => match v.downcast_ref::<CelBool>() {
                Some(b) => Ok(*b.inner()),
                None => Err(format!(
                    "expression must evaluate to bool, not {}",
                    v.get_type().name()
                )),
            },
            Err(e) => Err(e.to_string()),
        }
    }
}

fn attribute_value<'a>(value: CelAttribute<'a>) -> Box<dyn Val + 'a> {
    match value {
        CelAttribute::Int(i) => Box::new(CelInt::from(i)),
        CelAttribute::Bool(b) => Box::new(CelBool::from(b)),
        CelAttribute::String(s) => Box::new(CelString::from(s)),
        CelAttribute::Version(v) => Box::new(CelSemver(v.clone())),
    }
}

fn group<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str, Box<dyn Val + 'a>)>,
) -> DomainMaps<'a> {
    type Entries<'a> = HashMap<CelMapKey<'a>, Box<dyn Val + 'a>>;
    let mut maps: Vec<(&'a str, Entries<'a>)> = Vec::new();
    for (domain, name, value) in entries {
        let slot = match maps.iter().position(|(d, _)| *d == domain) {
            Some(i) => i,
            None => {
                maps.push((domain, HashMap::new()));
                maps.len() - 1
            }
        };
        maps[slot].1.insert(CelMapKey::from(name), value);
    }
    DomainMaps {
        domains: maps
            .into_iter()
            .map(|(d, m)| (d, CelMap::from(m)))
            .collect(),
        ..DomainMaps::default()
    }
}

fn device_value<'a>(device: &CelDevice<'a>) -> Box<dyn Val + 'a> {
    let attributes = group(
        device
            .attributes
            .iter()
            .map(|&(d, n, v)| (d, n, attribute_value(v))),
    );
    let capacity = group(device.capacity.iter().map(|&(d, n, v)| {
        let q: Box<dyn Val + 'a> = Box::new(CelQuantity::from_units(v));
        (d, n, q)
    }));
    let mut fields: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::with_capacity(4);
    fields.insert(
        CelMapKey::from("driver"),
        Box::new(CelString::from(device.driver)),
    );
    fields.insert(CelMapKey::from("attributes"), Box::new(attributes));
    fields.insert(CelMapKey::from("capacity"), Box::new(capacity));
    fields.insert(
        CelMapKey::from("allowMultipleAllocations"),
        Box::new(CelBool::from(device.allow_multiple_allocations)),
    );
    Box::new(CelMap::from(fields))
}

/// Deepest nesting of `(`, `[` and `{` outside string literals (a guard against stack
/// exhaustion in the parser).
fn bracket_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == q {
                quote = None;
            }
            continue;
        }
        match b {
            b'"' | b'\'' => quote = Some(b),
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Names an expression may use besides `device` and its own comprehension variables: type
/// names and the namespaces of library functions.
const KNOWN_NAMES: &[&str] = &[
    "device",
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional",
    "strings",
    "lists",
    "math",
    "cel",
];

/// Rejects undeclared variables and too deep expression trees; returns the tree's depth.
fn check<'e>(e: &'e IdedExpr, scope: &mut Vec<&'e str>, depth: usize) -> Result<usize, String> {
    if depth >= MAX_TREE_DEPTH {
        return Err(format!(
            "expression is nested more than {MAX_TREE_DEPTH} levels deep"
        ));
    }
    let d = depth + 1;
    let mut deepest = d;
    let mut sub = |x: &'e IdedExpr, scope: &mut Vec<&'e str>| -> Result<(), String> {
        deepest = deepest.max(check(x, scope, d)?);
        Ok(())
    };
    match &e.expr {
        Expr::Ident(name) => {
            if !scope.contains(&name.as_str()) && !KNOWN_NAMES.contains(&name.as_str()) {
                return Err(format!(
                    "undeclared reference to '{name}' (the only variable is 'device')"
                ));
            }
        }
        Expr::Select(s) => sub(&s.operand, scope)?,
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                sub(t, scope)?;
            }
            for a in &c.args {
                sub(a, scope)?;
            }
        }
        Expr::List(l) => {
            for x in &l.elements {
                sub(x, scope)?;
            }
        }
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    sub(&me.key, scope)?;
                    sub(&me.value, scope)?;
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    sub(&f.value, scope)?;
                }
            }
        }
        Expr::Comprehension(c) => {
            sub(&c.iter_range, scope)?;
            sub(&c.accu_init, scope)?;
            let mark = scope.len();
            scope.push(c.iter_var.as_str());
            if let Some(v2) = &c.iter_var2 {
                scope.push(v2.as_str());
            }
            scope.push(c.accu_var.as_str());
            sub(&c.loop_cond, scope)?;
            sub(&c.loop_step, scope)?;
            sub(&c.result, scope)?;
            scope.truncate(mark);
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
    Ok(deepest)
}

/// How many elements a comprehension range can have, as far as the text tells.
fn range_size(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        // A `map`/`filter` result has at most as many elements as its own range.
        Expr::Comprehension(c) => range_size(&c.iter_range),
        _ => UNKNOWN_RANGE,
    }
}

/// Estimated evaluation cost: one per node, comprehension bodies times their range.
fn cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 1,
        Expr::Select(s) => 1u64.saturating_add(cost(&s.operand)),
        Expr::Call(c) => c
            .args
            .iter()
            .chain(c.target.as_deref())
            .fold(1u64, |acc, a| acc.saturating_add(cost(a))),
        Expr::List(l) => l
            .elements
            .iter()
            .fold(1u64, |acc, a| acc.saturating_add(cost(a))),
        Expr::Map(m) => m.entries.iter().fold(1u64, |acc, entry| match &entry.expr {
            EntryExpr::MapEntry(me) => acc
                .saturating_add(cost(&me.key))
                .saturating_add(cost(&me.value)),
            EntryExpr::StructField(f) => acc.saturating_add(cost(&f.value)),
        }),
        Expr::Struct(s) => s.entries.iter().fold(1u64, |acc, entry| match &entry.expr {
            EntryExpr::StructField(f) => acc.saturating_add(cost(&f.value)),
            EntryExpr::MapEntry(me) => acc.saturating_add(cost(&me.value)),
        }),
        Expr::Comprehension(c) => {
            let body = cost(&c.loop_cond).saturating_add(cost(&c.loop_step));
            cost(&c.iter_range)
                .saturating_add(cost(&c.accu_init))
                .saturating_add(range_size(&c.iter_range).saturating_mul(body))
                .saturating_add(cost(&c.result))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu<'a>(version: &'a Semver) -> CelDevice<'a> {
        CelDevice {
            driver: "gpu.example.com",
            attributes: vec![
                ("gpu.example.com", "model", CelAttribute::String("A100")),
                ("gpu.example.com", "numa", CelAttribute::Int(1)),
                ("gpu.example.com", "mig", CelAttribute::Bool(false)),
                (
                    "gpu.example.com",
                    "driverVersion",
                    CelAttribute::Version(version),
                ),
                ("pci.example.com", "root", CelAttribute::String("pci0")),
            ],
            capacity: vec![("gpu.example.com", "memory", 80 << 30)],
            allow_multiple_allocations: false,
        }
    }

    fn eval(text: &str) -> Result<bool, String> {
        let env = CelEnvironment::new();
        let compiled = env.compile(text)?;
        let v = Semver::parse("535.1.0").unwrap();
        env.evaluate(&compiled, &gpu(&v))
    }

    #[test]
    fn device_fields_and_domains() {
        assert_eq!(eval(r#"device.driver == "gpu.example.com""#), Ok(true));
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].model == "A100""#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].numa == 1"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"!device.attributes["gpu.example.com"].mig"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["pci.example.com"].root == "pci0""#),
            Ok(true)
        );
        assert_eq!(eval("device.allowMultipleAllocations"), Ok(false));
        assert_eq!(
            eval(
                r#"cel.bind(g, device.attributes["gpu.example.com"], g.model == "A100" && g.numa == 1)"#
            ),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].model.startsWith("A1")"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].model.matches("^A[0-9]+$")"#),
            Ok(true)
        );
    }

    #[test]
    fn missing_domain_is_empty_and_missing_attribute_is_an_error() {
        assert_eq!(
            eval(r#"has(device.attributes["nope.example.com"].model)"#),
            Ok(false)
        );
        assert_eq!(
            eval(r#"size(device.attributes["nope.example.com"]) == 0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"has(device.attributes["gpu.example.com"].model)"#),
            Ok(true)
        );
        let err = eval(r#"device.attributes["gpu.example.com"].missing == 1"#).unwrap_err();
        assert!(err.contains("missing"), "{err}");
        assert!(eval(r#"device.attributes["nope.example.com"].model == "x""#).is_err());
        assert!(eval("device.nosuchfield == 1").is_err());
    }

    #[test]
    fn quantities() {
        let cap = r#"device.capacity["gpu.example.com"].memory"#;
        assert_eq!(
            eval(&format!(r#"{cap}.compareTo(quantity("40Gi")) >= 0"#)),
            Ok(true)
        );
        assert_eq!(
            eval(&format!(r#"{cap}.isGreaterThan(quantity("80Gi"))"#)),
            Ok(false)
        );
        assert_eq!(
            eval(&format!(r#"{cap}.isLessThan(quantity("81Gi"))"#)),
            Ok(true)
        );
        assert_eq!(eval(&format!(r#"{cap} == quantity("80Gi")"#)), Ok(true));
        assert_eq!(eval(&format!(r#"{cap} == quantity("81920Mi")"#)), Ok(true));
        assert_eq!(
            eval(&format!(r#"{cap}.asInteger() == 85899345920"#)),
            Ok(true)
        );
        assert_eq!(eval(r#"quantity("1.5").isInteger()"#), Ok(false));
        assert_eq!(eval(r#"quantity("1500m") == quantity("1.5")"#), Ok(true));
        assert_eq!(
            eval(r#"quantity("1").add(quantity("500m")).sub(1).sign() == 1"#),
            Ok(true)
        );
        assert_eq!(eval(r#"quantity("-2").sign() == -1"#), Ok(true));
        assert_eq!(
            eval(r#"quantity("2").asApproximateFloat() == 2.0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"isQuantity("12Gi") && !isQuantity("12GB")"#),
            Ok(true)
        );
        assert!(eval(r#"quantity("12GB") == quantity("1")"#).is_err());
        assert!(eval(r#"quantity("1.5").asInteger() == 1"#).is_err());
    }

    #[test]
    fn semantic_versions() {
        let ver = r#"device.attributes["gpu.example.com"].driverVersion"#;
        assert_eq!(
            eval(&format!(r#"{ver}.isGreaterThan(semver("500.0.0"))"#)),
            Ok(true)
        );
        assert_eq!(
            eval(&format!(r#"{ver}.compareTo(semver("535.1.0")) == 0"#)),
            Ok(true)
        );
        assert_eq!(eval(&format!(r#"{ver} == semver("535.1.0")"#)), Ok(true));
        assert_eq!(
            eval(&format!(r#"{ver}.major() == 535 && {ver}.minor() == 1"#)),
            Ok(true)
        );
        assert_eq!(
            eval(&format!(r#"{ver}.isLessThan(semver("v600", true))"#)),
            Ok(true)
        );
        assert_eq!(
            eval(r#"isSemver("1.2.3") && !isSemver("1.2") && isSemver("1.2", true)"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))"#),
            Ok(true)
        );
        assert_eq!(eval(r#"semver("1.2.3").patch() == 3"#), Ok(true));
    }

    #[test]
    fn compile_errors() {
        let env = CelEnvironment::new();
        assert!(env.compile("device.driver ==").is_err());
        let e = env.compile("devcie.driver == 'x'").unwrap_err();
        assert!(e.contains("devcie"), "{e}");
        assert!(env.compile(&"x".repeat(MAX_EXPRESSION_LEN + 1)).is_err());
        let deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        assert!(env.compile(&deep).is_err());
        let costly = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, \
            device.attributes['d'].list.all(c, device.attributes['d'].list.all(d, \
            device.attributes['d'].list.all(e, c == d)))))";
        let e = env.compile(costly).unwrap_err();
        assert!(e.contains("cost"), "{e}");
        assert!(
            env.compile("[1, 2].exists(x, x == 2) && device.driver != ''")
                .is_ok()
        );
    }

    #[test]
    fn non_bool_results_are_errors() {
        let e = eval("device.driver").unwrap_err();
        assert!(e.contains("bool"), "{e}");
        assert!(eval(r#"quantity("1")"#).is_err());
    }

    #[test]
    fn long_operator_chains_are_bounded_and_do_not_overflow() {
        let env = CelEnvironment::new();
        let v = Semver::parse("1.0.0").unwrap();
        // `||` chains are balanced by the parser: long ones are fine.
        let chain = vec!["device.driver == 'x'"; 400].join(" || ");
        let c = env.compile(&chain).map_err(|e| e.to_string()).unwrap();
        assert_eq!(env.evaluate(&c, &gpu(&v)), Ok(false));
        // `+` chains nest one level per term: the deepest accepted one evaluates on a test
        // thread's small stack, a deeper one is rejected when compiled.
        let sum = |n: usize| {
            format!(
                "device.attributes['gpu.example.com'].numa{} == {}",
                " + 1".repeat(n),
                n + 1
            )
        };
        let c = env.compile(&sum(250)).map_err(|e| e.to_string()).unwrap();
        assert_eq!(env.evaluate(&c, &gpu(&v)), Ok(true));
        match env.compile(&sum(400)) {
            Ok(_) => panic!("a 400-level expression must be rejected"),
            Err(e) => assert!(e.contains("nested"), "{e}"),
        }
    }

    #[test]
    fn adversarial_nesting_is_rejected_or_compiled_without_overflow() {
        let env = CelEnvironment::new();
        let v = Semver::parse("1.0.0").unwrap();
        let parens = format!("{}device.driver != ''{}", "(".repeat(64), ")".repeat(64));
        let c = env.compile(&parens).map_err(|e| e.to_string()).unwrap();
        assert_eq!(env.evaluate(&c, &gpu(&v)), Ok(true));
        let lists = format!("{}1{} != []", "[".repeat(64), "]".repeat(64));
        assert!(env.compile(&lists).is_ok());
        for text in [
            format!("{}true", "!".repeat(10_000)),
            format!("{}1 == 1", "-".repeat(10_000)),
            format!("device{} == 1", ".a".repeat(3_000)),
            format!("{}false", "true ? true : ".repeat(700)),
            format!("{}true{}", "(".repeat(5_000), ")".repeat(5_000)),
        ] {
            if let Ok(c) = env.compile(&text) {
                let _ = env.evaluate(&c, &gpu(&v));
            }
        }
    }

    #[test]
    fn programs_are_shareable_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CompiledExpression>();
        assert_send_sync::<CelEnvironment>();
    }
}
