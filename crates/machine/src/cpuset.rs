//! Sets of cpu (PU) or node ids in the kernel's list syntax ("0-3,8,10-11").
//! Unbounded (no 1024-cpu cap, unlike glibc's cpu_set_t), ordered, and cheap to compare.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An ordered set of kernel ids (cpus or nodes), printed and parsed as a kernel cpulist.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<u32>);

/// Why a cpulist string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cpu list {input:?}: {problem}")]
pub struct CpuListError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub problem: String,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the kernel's list syntax: comma-separated ids and inclusive ranges, optionally with a
    /// stride as in `0-15:4` (every 4th id). Whitespace and a trailing newline are tolerated, so sysfs
    /// files can be passed as read. An empty string is the empty set.
    pub fn parse(text: &str) -> Result<Self, CpuListError> {
        let err = |problem: String| CpuListError {
            input: text.to_string(),
            problem,
        };
        let mut set = BTreeSet::new();
        for part in text.trim().split(',') {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(err("empty element between commas".into()));
            }
            let (range, stride) = match part.split_once(':') {
                Some((r, s)) => {
                    let stride: u32 = s
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("bad stride {s:?} in {part:?}")))?;
                    if stride == 0 {
                        return Err(err(format!("stride 0 in {part:?}")));
                    }
                    (r, stride)
                }
                None => (part, 1),
            };
            let parse_id = |s: &str| -> Result<u32, CpuListError> {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| err(format!("{s:?} is not a non-negative integer")))
            };
            match range.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (parse_id(a)?, parse_id(b)?);
                    if a > b {
                        return Err(err(format!("range {a}-{b} runs backwards")));
                    }
                    if b - a > 1 << 22 {
                        return Err(err(format!("range {a}-{b} is implausibly large")));
                    }
                    set.extend((a..=b).step_by(stride as usize));
                }
                None => {
                    set.insert(parse_id(range)?);
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// Parses a kernel cpumask as in `/proc/PID/status` Cpus_allowed: comma-separated 32-bit hex words,
    /// most significant first.
    pub fn parse_mask(text: &str) -> Result<Self, CpuListError> {
        let mut set = BTreeSet::new();
        let words: Vec<&str> = text.trim().split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            let value = u32::from_str_radix(word.trim(), 16).map_err(|_| CpuListError {
                input: text.to_string(),
                problem: format!("{word:?} is not a 32-bit hex word"),
            })?;
            for bit in 0..32 {
                if value & (1 << bit) != 0 {
                    set.insert(i as u32 * 32 + bit);
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// Adds one id; returns whether it was new.
    pub fn insert(&mut self, id: u32) -> bool {
        self.0.insert(id)
    }

    /// Whether the id is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no id.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The smallest id.
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }

    /// The largest id.
    pub fn last(&self) -> Option<u32> {
        self.0.last().copied()
    }

    /// Ids in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// Ids in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// Whether the two sets share an id.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        !self.0.is_disjoint(&other.0)
    }

    /// The kernel's mask syntax: 32-bit hex words, most significant first, comma-separated.
    pub fn to_mask(&self) -> String {
        let words = self.last().map_or(1, |l| l as usize / 32 + 1);
        let mut out = Vec::with_capacity(words);
        for w in (0..words).rev() {
            let mut value = 0u32;
            for bit in 0..32 {
                if self.contains(w as u32 * 32 + bit) {
                    value |= 1 << bit;
                }
            }
            out.push(format!("{value:08x}"));
        }
        out.join(",")
    }

    /// A single hex number (`0x3c`), as Slurm's mask_cpu and taskset take.
    pub fn to_hex(&self) -> String {
        let mask = self.to_mask().replace(',', "");
        let trimmed = mask.trim_start_matches('0');
        format!("0x{}", if trimmed.is_empty() { "0" } else { trimmed })
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = u32;
    type IntoIter = std::iter::Copied<std::collections::btree_set::Iter<'a, u32>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().copied()
    }
}

impl FromStr for CpuSet {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse(s)
    }
}

/// Prints the list as the kernel does (`%*pbl`): every run of consecutive ids becomes a range.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.iter().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < ids.len() {
            let mut j = i;
            while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
                j += 1;
            }
            if i == j {
                parts.push(ids[i].to_string());
            } else {
                parts.push(format!("{}-{}", ids[i], ids[j]));
            }
            i = j + 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CpuSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        let s = CpuSet::parse("0-3,8,10-11\n").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse("0-8:4").unwrap().to_string(), "0,4,8");
        assert_eq!(CpuSet::parse("6,7").unwrap().to_string(), "6-7");
        assert!(CpuSet::parse("").unwrap().is_empty());
        assert!(CpuSet::parse("\n").unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_lists_with_the_reason() {
        assert!(CpuSet::parse("3-1")
            .unwrap_err()
            .problem
            .contains("backwards"));
        assert!(CpuSet::parse("a").unwrap_err().problem.contains("\"a\""));
        assert!(CpuSet::parse("1,,2").unwrap_err().problem.contains("empty"));
        assert!(CpuSet::parse("-1").is_err());
    }

    #[test]
    fn masks_round_trip_beyond_1024_cpus() {
        let s: CpuSet = [0, 1, 31, 32, 1500].into_iter().collect();
        let mask = s.to_mask();
        assert_eq!(CpuSet::parse_mask(&mask).unwrap(), s);
        assert_eq!(
            CpuSet::parse_mask("0000000c,00000000").unwrap().to_string(),
            "34-35"
        );
        let low: CpuSet = [0, 1, 4].into_iter().collect();
        assert_eq!(low.to_hex(), "0x13");
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(ids in proptest::collection::btree_set(0u32..3000, 0..64)) {
            let s = CpuSet(ids);
            prop_assert_eq!(CpuSet::parse(&s.to_string()).unwrap(), s);
        }
    }
}
