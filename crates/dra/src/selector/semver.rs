//! Semantic versions (semver 2.0.0) for `version` device attributes and the CEL `semver`
//! library: strict parsing, optional normalization as Kubernetes' `semver(s, true)` does, and
//! precedence ordering (build metadata ignored).

use std::cmp::Ordering;
use std::fmt;

/// One dot-separated pre-release identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PreRelease {
    Numeric(u64),
    Alphanumeric(String),
}

/// A parsed semantic version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pre: Vec<PreRelease>,
    build: Vec<String>,
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

fn parse_number(s: &str, strict: bool) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a number"));
    }
    if strict && s.len() > 1 && s.starts_with('0') {
        return Err(format!("{s:?} has a leading zero"));
    }
    s.parse::<u64>().map_err(|_| format!("{s:?} is too large"))
}

impl Semver {
    /// Parses a strict semver 2.0.0 string such as `1.2.3-rc.1+build.5`.
    pub fn parse(text: &str) -> Result<Semver, String> {
        Self::parse_with(text, false)
    }

    /// Parses leniently: a leading `v` is dropped, a missing minor or patch is taken as 0 and
    /// leading zeros of the numbers are accepted (Kubernetes' `semver(s, true)`).
    pub fn parse_normalized(text: &str) -> Result<Semver, String> {
        Self::parse_with(text, true)
    }

    fn parse_with(text: &str, normalize: bool) -> Result<Semver, String> {
        let err = |why: String| format!("invalid semantic version {text:?}: {why}");
        let mut rest = text;
        if normalize {
            rest = rest.strip_prefix('v').unwrap_or(rest);
        }
        let (rest, build) = match rest.split_once('+') {
            Some((a, b)) => (a, Some(b)),
            None => (rest, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (rest, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3 || (!normalize && parts.len() != 3) {
            return Err(err("expected MAJOR.MINOR.PATCH".into()));
        }
        let mut nums = [0u64; 3];
        for (i, p) in parts.iter().enumerate() {
            nums[i] = parse_number(p, !normalize).map_err(err)?;
        }
        let mut version = Semver {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
            pre: Vec::new(),
            build: Vec::new(),
        };
        if let Some(pre) = pre {
            for ident in pre.split('.') {
                if ident.is_empty() || !ident.bytes().all(is_ident_char) {
                    return Err(err(format!("pre-release identifier {ident:?} is invalid")));
                }
                if ident.bytes().all(|b| b.is_ascii_digit()) {
                    version
                        .pre
                        .push(PreRelease::Numeric(parse_number(ident, true).map_err(err)?));
                } else {
                    version
                        .pre
                        .push(PreRelease::Alphanumeric(ident.to_string()));
                }
            }
        }
        if let Some(build) = build {
            for ident in build.split('.') {
                if ident.is_empty() || !ident.bytes().all(is_ident_char) {
                    return Err(err(format!("build identifier {ident:?} is invalid")));
                }
                version.build.push(ident.to_string());
            }
        }
        Ok(version)
    }

    /// Precedence order of semver 2.0.0 (build metadata does not count).
    pub fn precedence(&self, other: &Semver) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let o = match (a, b) {
                            (PreRelease::Numeric(x), PreRelease::Numeric(y)) => x.cmp(y),
                            (PreRelease::Numeric(_), PreRelease::Alphanumeric(_)) => Ordering::Less,
                            (PreRelease::Alphanumeric(_), PreRelease::Numeric(_)) => {
                                Ordering::Greater
                            }
                            (PreRelease::Alphanumeric(x), PreRelease::Alphanumeric(y)) => x.cmp(y),
                        };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match p {
                PreRelease::Numeric(n) => write!(f, "{n}")?,
                PreRelease::Alphanumeric(s) => f.write_str(s)?,
            }
        }
        for (i, b) in self.build.iter().enumerate() {
            f.write_str(if i == 0 { "+" } else { "." })?;
            f.write_str(b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints_strict_versions() {
        for s in [
            "0.0.0",
            "1.2.3",
            "10.20.30-rc.1",
            "1.0.0-alpha-1.x+build.007",
        ] {
            assert_eq!(v(s).to_string(), s);
        }
        for bad in [
            "1", "1.2", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "v1.2.3", "1.2.x",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn normalizes_on_request() {
        assert_eq!(Semver::parse_normalized("v1").unwrap().to_string(), "1.0.0");
        assert_eq!(
            Semver::parse_normalized("01.02").unwrap().to_string(),
            "1.2.0"
        );
    }

    #[test]
    fn precedence_follows_the_spec() {
        let order = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.1.0",
            "2.0.0",
        ];
        for w in order.windows(2) {
            assert_eq!(v(w[0]).precedence(&v(w[1])), Ordering::Less, "{w:?}");
        }
        assert_eq!(v("1.0.0+a").precedence(&v("1.0.0+b")), Ordering::Equal);
    }
}
