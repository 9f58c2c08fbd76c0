//! Resource names interned to dense ids, and sparse resource lists.

use std::collections::HashMap;

/// A dense resource id. The first four are fixed; the rest are assigned in name order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub u16);

impl ResourceId {
    pub const CPU: ResourceId = ResourceId(0);
    pub const MEMORY: ResourceId = ResourceId(1);
    pub const EPHEMERAL_STORAGE: ResourceId = ResourceId(2);
    pub const PODS: ResourceId = ResourceId(3);
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The resource names a cluster uses. CPU is counted in milli-CPU, everything else in units
/// (bytes for memory and storage).
#[derive(Debug, Clone)]
pub struct ResourceNames {
    names: Vec<String>,
    ids: HashMap<String, ResourceId>,
}

impl Default for ResourceNames {
    fn default() -> Self {
        let mut r = ResourceNames {
            names: Vec::new(),
            ids: HashMap::new(),
        };
        for n in ["cpu", "memory", "ephemeral-storage", "pods"] {
            r.intern(n);
        }
        r
    }
}

impl ResourceNames {
    /// Returns the id of `name`, assigning the next free one if it is new.
    pub fn intern(&mut self, name: &str) -> ResourceId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id =
            ResourceId(u16::try_from(self.names.len()).expect("fewer than 65536 resource names"));
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
    pub fn get(&self, name: &str) -> Option<ResourceId> {
        self.ids.get(name).copied()
    }
    pub fn name(&self, id: ResourceId) -> &str {
        &self.names[id.index()]
    }
    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (ResourceId, &str)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (ResourceId(i as u16), n.as_str()))
    }
    /// Whether the resource is an extended or hugepages resource ("scalar" in Kubernetes terms).
    pub fn is_scalar(&self, id: ResourceId) -> bool {
        id.0 > ResourceId::PODS.0
    }
}

/// A sparse list of resource amounts, sorted by id, no zero entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceList(Vec<(ResourceId, i64)>);

impl ResourceList {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    pub fn get(&self, id: ResourceId) -> i64 {
        match self.0.binary_search_by_key(&id, |e| e.0) {
            Ok(i) => self.0[i].1,
            Err(_) => 0,
        }
    }
    pub fn set(&mut self, id: ResourceId, v: i64) {
        match self.0.binary_search_by_key(&id, |e| e.0) {
            Ok(i) => {
                if v == 0 {
                    self.0.remove(i);
                } else {
                    self.0[i].1 = v;
                }
            }
            Err(i) => {
                if v != 0 {
                    self.0.insert(i, (id, v))
                }
            }
        }
    }
    pub fn add(&mut self, id: ResourceId, v: i64) {
        let cur = self.get(id);
        self.set(id, cur.saturating_add(v));
    }
    /// Element-wise sum.
    pub fn add_all(&mut self, other: &ResourceList) {
        for &(id, v) in &other.0 {
            self.add(id, v);
        }
    }
    /// Element-wise maximum.
    pub fn max_all(&mut self, other: &ResourceList) {
        for &(id, v) in &other.0 {
            if v > self.get(id) {
                self.set(id, v);
            }
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = (ResourceId, i64)> + '_ {
        self.0.iter().copied()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_set_add_max() {
        let mut a = ResourceList::new();
        a.set(ResourceId(5), 3);
        a.add(ResourceId::CPU, 100);
        a.add(ResourceId::CPU, 50);
        assert_eq!(a.get(ResourceId::CPU), 150);
        let mut b = ResourceList::new();
        b.set(ResourceId::CPU, 400);
        b.set(ResourceId(5), 1);
        a.max_all(&b);
        assert_eq!(a.get(ResourceId::CPU), 400);
        assert_eq!(a.get(ResourceId(5)), 3);
        a.set(ResourceId(5), 0);
        assert_eq!(a.iter().count(), 1);
    }

    #[test]
    fn fixed_ids() {
        let mut n = ResourceNames::default();
        assert_eq!(n.get("cpu"), Some(ResourceId::CPU));
        assert_eq!(n.get("pods"), Some(ResourceId::PODS));
        let g = n.intern("nvidia.com/gpu");
        assert_eq!(g, ResourceId(4));
        assert!(n.is_scalar(g));
        assert_eq!(n.name(g), "nvidia.com/gpu");
    }
}
