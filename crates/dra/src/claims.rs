//! Compiled device classes and claim specs, and the selector registry: each distinct CEL
//! expression compiled once, each (expression, device) pair evaluated at most once.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use lockstep_model::Toleration;
use lockstep_model::dra::{
    AllocationMode, ConstraintKind, DeviceClass, DeviceRequestKind, ExactDeviceRequest,
    ResourceClaimSpec,
};

use crate::catalog::{Catalog, DeviceId};
use crate::error::DraError;
use crate::selector::{CelEnvironment, CompiledExpression};

const UNKNOWN: u8 = 0;
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const ERROR: u8 = 3;

/// The outcome of one selector on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    Yes,
    No,
    /// Evaluation failed: the device does not match; the message is recomputed on demand.
    Error,
}

struct SelectorEntry {
    expr: CompiledExpression,
    /// One byte per device: UNKNOWN, TRUE, FALSE or ERROR.
    cache: OnceLock<Box<[AtomicU8]>>,
}

/// All selector expressions, deduplicated by text.
#[derive(Default)]
pub(crate) struct Selectors {
    env: CelEnvironment,
    ids: HashMap<String, u32>,
    list: Vec<SelectorEntry>,
}

impl std::fmt::Debug for Selectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Selectors({})", self.list.len())
    }
}

impl Selectors {
    /// The id of `text`, compiling it the first time it is seen.
    pub fn add(&mut self, text: &str, object: &str, field: &str) -> Result<u32, DraError> {
        if let Some(&id) = self.ids.get(text) {
            return Ok(id);
        }
        let expr = self
            .env
            .compile(text)
            .map_err(|message| DraError::InvalidSelector {
                object: object.to_string(),
                field: field.to_string(),
                expression: text.to_string(),
                message,
            })?;
        let id = self.list.len() as u32;
        self.list.push(SelectorEntry {
            expr,
            cache: OnceLock::new(),
        });
        self.ids.insert(text.to_string(), id);
        Ok(id)
    }

    /// Whether selector `id` selects `device`, evaluating it only the first time.
    pub fn matches(&self, id: u32, device: DeviceId, catalog: &Catalog) -> Match {
        let entry = &self.list[id as usize];
        let cache = entry.cache.get_or_init(|| {
            (0..catalog.devices.len())
                .map(|_| AtomicU8::new(UNKNOWN))
                .collect()
        });
        let slot = &cache[device.index()];
        let mut v = slot.load(Ordering::Relaxed);
        if v == UNKNOWN {
            v = match self.env.evaluate(&entry.expr, &catalog.cel_device(device)) {
                Ok(true) => TRUE,
                Ok(false) => FALSE,
                Err(_) => ERROR,
            };
            slot.store(v, Ordering::Relaxed);
        }
        match v {
            TRUE => Match::Yes,
            FALSE => Match::No,
            _ => Match::Error,
        }
    }

    /// The evaluation error of selector `id` on `device` (for messages).
    pub fn error_message(&self, id: u32, device: DeviceId, catalog: &Catalog) -> String {
        let entry = &self.list[id as usize];
        let reason = match self.env.evaluate(&entry.expr, &catalog.cel_device(device)) {
            Err(e) => e,
            Ok(b) => format!("evaluated to {b}"),
        };
        format!(
            "CEL selector {:?} failed on device {}: {reason}",
            entry.expr.text,
            catalog.device_label(device)
        )
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ClassC {
    pub selectors: Vec<u32>,
}

/// One request, or one subrequest of a `firstAvailable` request.
#[derive(Debug, Clone)]
pub(crate) struct AltC {
    /// The subrequest name (the request name for `exactly`).
    pub name: String,
    /// The class, or its name when it does not exist.
    pub class: Result<u32, String>,
    /// Class selectors first, then the request's own.
    pub selectors: Vec<u32>,
    pub mode: AllocationMode,
    pub admin: bool,
    pub tolerations: Vec<Toleration>,
    /// (capacity name id, or `None` when no device has such a capacity; amount).
    pub capacity: Vec<(Option<u32>, i64)>,
    /// Bit `j` set: claim constraint `j` covers this (sub)request.
    pub constraint_mask: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct RequestC {
    pub name: String,
    pub first_available: bool,
    pub alts: Vec<AltC>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum ConstraintC {
    /// Attribute name id (`None`: no device has it).
    Match(Option<u32>),
    Distinct(Option<u32>),
}

#[derive(Debug, Clone)]
pub(crate) struct SpecC {
    /// `ResourceClaim ns/name` or `ResourceClaimTemplate ns/name`.
    pub object: String,
    pub requests: Vec<RequestC>,
    pub constraints: Vec<ConstraintC>,
}

pub(crate) struct Compiler<'a> {
    pub selectors: &'a mut Selectors,
    pub catalog: &'a Catalog,
    pub classes: &'a HashMap<String, u32>,
    pub class_list: &'a [ClassC],
}

pub(crate) fn compile_class(
    selectors: &mut Selectors,
    class: &DeviceClass,
) -> Result<ClassC, DraError> {
    let object = format!("DeviceClass {}", class.name);
    let ids = class
        .selectors
        .iter()
        .enumerate()
        .map(|(i, s)| selectors.add(s, &object, &format!("spec.selectors[{i}].cel.expression")))
        .collect::<Result<_, _>>()?;
    Ok(ClassC { selectors: ids })
}

impl Compiler<'_> {
    /// Compiles a claim spec; `prefix` is the field path of the spec (`spec` or `spec.spec`).
    pub fn spec(
        &mut self,
        object: String,
        prefix: &str,
        spec: &ResourceClaimSpec,
    ) -> Result<SpecC, DraError> {
        let invalid = |field: String, message: String| DraError::Invalid {
            object: object.clone(),
            field,
            message,
        };
        if spec.constraints.len() > 64 {
            return Err(invalid(
                format!("{prefix}.devices.constraints"),
                format!(
                    "{} constraints; at most 64 are supported",
                    spec.constraints.len()
                ),
            ));
        }
        // Names a constraint may refer to.
        let mut names: HashMap<String, ()> = HashMap::new();
        for (ri, r) in spec.requests.iter().enumerate() {
            if names.insert(r.name.clone(), ()).is_some() {
                return Err(invalid(
                    format!("{prefix}.devices.requests[{ri}].name"),
                    format!("request name {:?} is used twice", r.name),
                ));
            }
            if let DeviceRequestKind::FirstAvailable(subs) = &r.kind {
                for s in subs {
                    names.insert(format!("{}/{}", r.name, s.name), ());
                }
            }
        }
        for (ci, c) in spec.constraints.iter().enumerate() {
            let (kind, attr) = match &c.kind {
                ConstraintKind::MatchAttribute(a) => ("matchAttribute", a),
                ConstraintKind::DistinctAttribute(a) => ("distinctAttribute", a),
            };
            if !attr.contains('/') {
                return Err(invalid(
                    format!("{prefix}.devices.constraints[{ci}].{kind}"),
                    format!("{attr:?} must be a fully qualified attribute name (domain/name)"),
                ));
            }
            for (k, n) in c.requests.iter().enumerate() {
                if !names.contains_key(n) {
                    return Err(invalid(
                        format!("{prefix}.devices.constraints[{ci}].requests[{k}]"),
                        format!("constraint names request {n:?}, which the claim does not have"),
                    ));
                }
            }
        }
        let constraints = spec
            .constraints
            .iter()
            .map(|c| match &c.kind {
                ConstraintKind::MatchAttribute(a) => ConstraintC::Match(self.catalog.names.get(a)),
                ConstraintKind::DistinctAttribute(a) => {
                    ConstraintC::Distinct(self.catalog.names.get(a))
                }
            })
            .collect();

        let mut requests = Vec::with_capacity(spec.requests.len());
        for (ri, r) in spec.requests.iter().enumerate() {
            let mask_for = |sub: Option<&str>| -> u64 {
                let mut mask = 0u64;
                for (j, c) in spec.constraints.iter().enumerate() {
                    let applies = c.requests.is_empty()
                        || c.requests.iter().any(|n| {
                            *n == r.name || sub.is_some_and(|s| *n == format!("{}/{s}", r.name))
                        });
                    if applies {
                        mask |= 1 << j;
                    }
                }
                mask
            };
            let req = match &r.kind {
                DeviceRequestKind::Exactly(e) => RequestC {
                    name: r.name.clone(),
                    first_available: false,
                    alts: vec![self.alt(
                        &object,
                        &format!("{prefix}.devices.requests[{ri}].exactly"),
                        &r.name,
                        e,
                        mask_for(None),
                    )?],
                },
                DeviceRequestKind::FirstAvailable(subs) => {
                    if subs.is_empty() {
                        return Err(invalid(
                            format!("{prefix}.devices.requests[{ri}].firstAvailable"),
                            "firstAvailable needs at least one subrequest".into(),
                        ));
                    }
                    let mut alts = Vec::with_capacity(subs.len());
                    for (si, s) in subs.iter().enumerate() {
                        alts.push(self.alt(
                            &object,
                            &format!("{prefix}.devices.requests[{ri}].firstAvailable[{si}]"),
                            &s.name,
                            &s.request,
                            mask_for(Some(&s.name)),
                        )?);
                    }
                    RequestC {
                        name: r.name.clone(),
                        first_available: true,
                        alts,
                    }
                }
            };
            requests.push(req);
        }
        Ok(SpecC {
            object,
            requests,
            constraints,
        })
    }

    fn alt(
        &mut self,
        object: &str,
        field: &str,
        name: &str,
        e: &ExactDeviceRequest,
        constraint_mask: u64,
    ) -> Result<AltC, DraError> {
        if e.allocation_mode == AllocationMode::ExactCount(0) {
            return Err(DraError::Invalid {
                object: object.to_string(),
                field: format!("{field}.count"),
                message: "count must be at least 1".into(),
            });
        }
        for (k, &v) in &e.capacity_requests {
            if v < 0 {
                return Err(DraError::Invalid {
                    object: object.to_string(),
                    field: format!("{field}.capacity.requests[{k}]"),
                    message: format!("capacity request {v} is negative"),
                });
            }
        }
        let class = match self.classes.get(&e.device_class_name) {
            Some(&c) => Ok(c),
            None => Err(e.device_class_name.clone()),
        };
        let mut selectors = match class {
            Ok(c) => self.class_list[c as usize].selectors.clone(),
            Err(_) => Vec::new(),
        };
        for (i, s) in e.selectors.iter().enumerate() {
            selectors.push(self.selectors.add(
                s,
                object,
                &format!("{field}.selectors[{i}].cel.expression"),
            )?);
        }
        Ok(AltC {
            name: name.to_string(),
            class,
            selectors,
            mode: e.allocation_mode,
            admin: e.admin_access,
            tolerations: e.tolerations.clone(),
            capacity: e
                .capacity_requests
                .iter()
                .map(|(k, &v)| (self.catalog.names.get(k), v))
                .collect(),
            constraint_mask,
        })
    }
}
