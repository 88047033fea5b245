//! The files of a table spread over several SQLite files, as a user names them: paths, glob
//! patterns (`'tenants/*.db'`, expanded here in sorted order, so a quoted pattern means the
//! same on every shell) and `@list.txt` files (one path per line; blank lines and lines
//! starting with `#` are skipped; relative paths are taken from the current directory, as
//! the shell would). [`expand`] keeps the order given, each pattern's matches sorted, and
//! refuses a pattern that matches nothing, a list it cannot read and a path named twice.
//!
//! Layering: on its own (the error type only).

use std::collections::HashSet;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Whether `s` is a glob pattern (holds `*`, `?` or `[`) rather than a path.
pub fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The files `inputs` name, in order (see the module docs). A path that exists is taken as
/// a path even when it holds a pattern character.
pub fn expand<S: AsRef<str>>(inputs: &[S]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let input = input.as_ref();
        if let Some(list) = input.strip_prefix('@') {
            let text = std::fs::read_to_string(list).map_err(|source| Error::Io {
                path: list.into(),
                op: "read the list of files".into(),
                source,
            })?;
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                expand_one(line, &mut out)?;
            }
        } else {
            expand_one(input, &mut out)?;
        }
    }
    let mut seen = HashSet::with_capacity(out.len());
    for p in &out {
        if !seen.insert(p) {
            return Err(Error::Invalid {
                path: p.clone(),
                what: "named twice among the files (a table's rows would be counted twice)".into(),
            });
        }
    }
    Ok(out)
}

fn expand_one(input: &str, out: &mut Vec<PathBuf>) -> Result<()> {
    if !is_pattern(input) || std::path::Path::new(input).exists() {
        out.push(PathBuf::from(input));
        return Ok(());
    }
    let invalid = |what: String| Error::Invalid {
        path: input.into(),
        what,
    };
    let paths = glob::glob(input).map_err(|e| invalid(format!("not a valid pattern: {e}")))?;
    let mut matched = Vec::new();
    for p in paths {
        let p = p.map_err(|e| Error::Io {
            path: e.path().to_path_buf(),
            op: "list while expanding the pattern".into(),
            source: e.into(),
        })?;
        if !p.is_dir() {
            matched.push(p);
        }
    }
    if matched.is_empty() {
        return Err(invalid("no file matches this pattern".into()));
    }
    matched.sort();
    out.extend(matched);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_patterns_and_lists_expand_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["b.db", "a.db", "c.txt", "10.db", "9.db"] {
            std::fs::write(d.join(name), b"").unwrap();
        }
        std::fs::create_dir(d.join("sub.db")).unwrap();
        let pattern = format!("{}/*.db", d.display());
        let got = expand(&[pattern.as_str()]).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        // Sorted as strings (as `ls` sorts in the C locale); directories left out.
        assert_eq!(names, ["10.db", "9.db", "a.db", "b.db"]);

        let list = d.join("list.txt");
        std::fs::write(
            &list,
            format!(
                "# tenants\n{}\n\n  {}  \n",
                d.join("b.db").display(),
                d.join("a.db").display()
            ),
        )
        .unwrap();
        let c = d.join("c.txt");
        let got = expand(&[format!("@{}", list.display()), c.display().to_string()]).unwrap();
        assert_eq!(got, vec![d.join("b.db"), d.join("a.db"), c]);
    }

    #[test]
    fn empty_patterns_unreadable_lists_and_repeats_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.db"), b"").unwrap();
        let none = format!("{}/*.sqlite", d.display());
        let e = expand(&[none.as_str()]).unwrap_err().to_string();
        assert!(e.contains("no file matches this pattern"), "{e}");
        assert!(e.contains("*.sqlite"), "{e}");
        let e = expand(&[format!("@{}/missing.txt", d.display())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.txt") && e.contains("read the list of files"),
            "{e}"
        );
        let a = d.join("a.db").display().to_string();
        let pattern = format!("{}/*.db", d.display());
        let e = expand(&[a.as_str(), pattern.as_str()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("named twice"), "{e}");
        // A plain path is not checked here: opening it names it when it is missing.
        assert_eq!(
            expand(&["nowhere.db"]).unwrap(),
            vec![PathBuf::from("nowhere.db")]
        );
    }
}
