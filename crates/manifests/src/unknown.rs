//! Fields a manifest sets that the Kubernetes API does not define (a misspelt `resource:` for
//! `resources:`, a field of another version). Deserializing into the API types drops them
//! silently, as the API server's non-strict decoding does; this module finds them while the
//! object is deserialized and names each by its path, e.g.
//! `spec.containers[0].resource`. They are warnings; a caller that wants them to be errors
//! (`--strict`) reads [`crate::Loaded::unknown_fields`].

use serde::de::DeserializeOwned;
use serde_json::Value as Json;

use crate::error::Origin;

/// One field the API type of its object does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub origin: Origin,
    /// e.g. `Pod default/web`.
    pub object: String,
    /// e.g. `spec.containers[0].resource`.
    pub path: String,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}: unknown field",
            self.origin, self.object, self.path
        )
    }
}

impl UnknownField {
    /// The warning printed when unknown fields are not errors.
    pub(crate) fn warning(&self) -> String {
        format!(
            "warning: {self}; the Kubernetes API does not define it and lockstep ignores it \
             (check its spelling and indentation)"
        )
    }
}

/// Deserializes `value` as serde_path_to_error does, and also returns the paths (from the top
/// of the value) of every field the type ignored.
pub(crate) fn deserialize<T: DeserializeOwned>(
    value: Json,
) -> Result<(T, Vec<String>), serde_path_to_error::Error<serde_json::Error>> {
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(display(&path));
    let ignored = serde_ignored::Deserializer::new(value, &mut note);
    let t = serde_path_to_error::deserialize(ignored)?;
    Ok((t, unknown))
}

/// `a.b[0].c` for serde_ignored's path.
fn display(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", display(parent)),
        Path::Map { parent, key } => {
            let parent = display(parent);
            if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => display(parent),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn a_misspelt_field_is_named_by_its_path() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labelz": {}},
            "spec": {"containers": [
                {"name": "a"},
                {"name": "b", "resource": {"requests": {"cpu": "1"}}}
            ]},
        });
        let (pod, unknown) = deserialize::<Pod>(pod).expect("a valid pod");
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(unknown, ["metadata.labelz", "spec.containers[1].resource"]);
    }

    #[test]
    fn a_pod_of_known_fields_has_none() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
                     "tolerations": [{"key": "k", "operator": "Exists"}]},
        });
        let (_, unknown) = deserialize::<Pod>(pod).expect("a valid pod");
        assert!(unknown.is_empty(), "{unknown:?}");
    }
}
