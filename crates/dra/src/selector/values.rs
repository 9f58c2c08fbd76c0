//! CEL values of the Kubernetes DRA environment: `Quantity`, `Semver`, and the
//! `device.attributes` / `device.capacity` lookups (an unknown domain is an empty map).

use std::cmp::Ordering;

use cel::ExecutionError;
use cel::common::traits::{Indexer, Sizer};
use cel::common::types::{CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use std::any::Any;

use super::semver::Semver;

pub(crate) static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");
pub(crate) static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

const NANO: i128 = 1_000_000_000;

/// A Kubernetes quantity inside CEL, exact in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelQuantity {
    pub nano: i128,
}

impl CelQuantity {
    pub fn from_units(units: i64) -> Self {
        CelQuantity {
            nano: i128::from(units) * NANO,
        }
    }

    /// Parses a quantity string (`40Gi`, `1.5`, `100m`). Sub-unit digits of values beyond
    /// about 9.2e9 units are rounded up to whole units.
    pub fn parse(text: &str) -> Result<Self, String> {
        let q = lockstep_model::Quantity::parse(text).map_err(|e| e.to_string())?;
        if let Some(nano) = q.scaled_ceil(9) {
            return Ok(CelQuantity {
                nano: i128::from(nano),
            });
        }
        match q.units() {
            Some(units) => Ok(Self::from_units(units)),
            None => Err(format!("quantity {text:?} is too large")),
        }
    }
}

impl Val for CelQuantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<CelQuantity>()
            .is_some_and(|o| o.nano == self.nano)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for CelQuantity {}

/// A semantic version inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelSemver(pub Semver);

impl Val for CelSemver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<CelSemver>()
            .is_some_and(|o| o.0.precedence(&self.0) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for CelSemver {}

static DOMAINS_TYPE: Type = Type::new_unspecified_type("kubernetes.DeviceDomains");

/// `device.attributes` or `device.capacity`: maps grouped by domain. Looking up a domain the
/// device does not have gives an empty map, as Kubernetes defines it.
#[derive(Debug, Clone)]
pub struct DomainMaps<'v> {
    pub domains: Vec<(&'v str, CelMap<'v>)>,
    pub empty: CelMap<'v>,
}

impl<'v> Default for DomainMaps<'v> {
    fn default() -> Self {
        DomainMaps {
            domains: Vec::new(),
            empty: CelMap::from(
                std::collections::HashMap::<CelMapKey<'v>, Box<dyn Val + 'v>>::new(),
            ),
        }
    }
}

impl Val for DomainMaps<'_> {
    fn get_type(&self) -> &Type {
        &DOMAINS_TYPE
    }
    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        &DOMAINS_TYPE
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
}

impl Sizer for DomainMaps<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(self.domains.len() as i64)
    }
}

impl<'m> Indexer for DomainMaps<'m> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let Some(domain) = idx.downcast_ref::<CelString>() else {
            return Err(ExecutionError::UnexpectedType {
                got: idx.get_type().name().to_owned(),
                want: "string".to_owned(),
            });
        };
        let map = self
            .domains
            .iter()
            .find(|(d, _)| *d == domain.inner())
            .map(|(_, m)| m)
            .unwrap_or(&self.empty);
        Ok(CowVal::Borrowed(map))
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}
