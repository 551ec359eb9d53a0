//! The programs the tests start, and the Debian package that installs each:
//! a test on a machine without one fails at its own line, naming the package,
//! instead of deep in the support code.

use std::path::Path;

/// `(program, Debian package)` for every program the tests run.
const PACKAGES: [(&str, &str); 3] =
    [("redis-server", "redis-server"), ("redis-cli", "redis-tools"), ("openssl", "openssl")];

/// Panics, at the caller's line, unless `program` is on the `PATH`; the
/// message names the package to install and the script that installs it.
///
/// ```
/// redlimit_test_support::programs::require("sh");
/// ```
#[track_caller]
pub fn require(program: &str) {
    if let Some(message) = missing(program, std::env::var_os("PATH")) {
        panic!("{message}");
    }
}

/// What [`require`] says when `program` is in no directory of `path`.
fn missing(program: &str, path: Option<std::ffi::OsString>) -> Option<String> {
    let found = path.is_some_and(|path| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))));
    let package = PACKAGES.iter().find(|(p, _)| *p == program).map_or(program, |(_, package)| package);
    (!found).then(|| {
        format!(
            "this test needs `{program}`, which is not on the PATH: install the Debian package `{package}` \
             (`apt-get install {package}`), or run the suite with `scripts/test`, which installs it"
        )
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::{missing, require};

    #[test]
    fn a_program_on_the_path_is_found() {
        require("sh");
        assert_eq!(missing("sh", Some("/nonexistent:/bin:/usr/bin".into())), None);
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let message = missing("redis-cli", Some("/nonexistent".into())).unwrap();
        assert!(message.contains("`redis-cli`, which is not on the PATH"), "{message}");
        assert!(message.contains("`apt-get install redis-tools`"), "{message}");
        assert!(message.contains("scripts/test"), "{message}");
        assert!(missing("openssl", None).unwrap().contains("`apt-get install openssl`"));
    }
}
